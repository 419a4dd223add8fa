"""Each extra, absent, gives one line naming `pip install 'ragsieve[EXTRA]'`: the CLI prints it and exits 2, the
library raises `MissingExtraError`; never a traceback.

Absence is simulated in a subprocess whose `sys.modules` maps the extra's top-level modules to None (import
fails, `find_spec` answers None: as if they were not installed), so the test environment keeps every extra. `test_release.py` checks the same for
`server` and `mcp` in a fresh venv where they are really missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

BLOCKER = """
import sys
# None in sys.modules: `import name` raises ModuleNotFoundError and importlib.util.find_spec(name) answers None,
# as for a package that is not installed (libraries that probe for optional packages see it as absent)
for name in sys.argv[1].split(","):
    sys.modules[name] = None
"""
CLI = (
    BLOCKER
    + """
from ragsieve.cli.main import main
sys.exit(main(sys.argv[2:]))
"""
)
LIBRARY = (
    BLOCKER
    + """
import json
from ragsieve.tools.errors import MissingExtraError
try:
    exec(sys.argv[2])
except MissingExtraError as exc:
    print(json.dumps({"extra": exc.extra, "module": exc.module, "message": str(exc)}))
else:
    print(json.dumps({"extra": None}))
"""
)
# the top-level modules each extra installs (what its absence removes)
MODULES = {
    "server": ["fastapi", "uvicorn", "python_multipart", "multipart", "prometheus_client"],
    "mcp": ["mcp"],
    "crawl": ["trafilatura", "lxml", "lxml_html_clean"],
    "documents": ["pypdf", "docx"],
    "code": ["tree_sitter_language_pack", "tree_sitter"],
    "fast": ["onnxruntime", "onnx"],
    "local": ["xllamacpp"],
    "milvus": ["pymilvus", "milvus_lite"],
    "ray": ["ray"],
    "eval": ["matplotlib"],
}


def cli_without(extra: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CLI, ",".join(MODULES[extra]), *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def library_without(extra: str, code: str, cwd: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", LIBRARY, ",".join(MODULES[extra]), code], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_one_line(result: subprocess.CompletedProcess, extra: str) -> str:
    """The CLI's whole stderr is one `ragsieve: error:` line naming the extra's install command; exit 2."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("ragsieve: error: "), result.stderr[-2000:]
    assert f"pip install 'ragsieve[{extra}]'" in lines[0]
    return lines[0]


def assert_names_extra(got: dict, extra: str) -> None:
    assert got["extra"] == extra, got
    assert f"pip install 'ragsieve[{extra}]'" in got["message"] and "\n" not in got["message"]


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe zorblax gateway listens on port 7412.\n", encoding="utf-8")
    return folder


def test_serve_without_the_server_extra(tmp_path):
    line = assert_one_line(cli_without("server", "serve", "--index", f"docs={tmp_path / 'idx'}", cwd=tmp_path), "server")
    assert "ragsieve serve" in line
    got = library_without("server", "import ragsieve.service.app", tmp_path)
    assert_names_extra(got, "server")


def test_mcp_without_the_mcp_extra(tmp_path):
    assert_one_line(cli_without("mcp", "mcp", "--index", f"docs={tmp_path / 'idx'}", cwd=tmp_path), "mcp")
    assert_names_extra(library_without("mcp", "import ragsieve.service.mcp.server", tmp_path), "mcp")


def test_serve_without_the_mcp_extra_answers_501_at_mcp(tmp_path):
    """The HTTP service runs without MCP; /mcp says how to add it (no traceback at start-up)."""
    code = (
        "from fastapi.testclient import TestClient\n"
        "from ragsieve.agent.config import Config\n"
        "from ragsieve.service.app import create_app\n"
        "from ragsieve.service.indexes.registry import IndexRegistry\n"
        "from ragsieve.service.settings import ServiceSettings\n"
        "app = create_app(IndexRegistry({}, Config()), ServiceSettings(data_dir=None), preload_model=False)\n"
        "with TestClient(app) as client:\n"
        "    reply = client.post('/mcp', json={})\n"
        "print(json.dumps({'extra': 'none', 'status': reply.status_code, 'body': reply.json()}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER + "import json\n" + code, "mcp"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["status"] == 501 and "pip install 'ragsieve[mcp]'" in got["body"]["error"]["message"]
    assert "no MCP at /mcp" in result.stderr and "Traceback" not in result.stderr


def assert_skipped_and_rest_indexed(result: subprocess.CompletedProcess, extra: str, skipped: list[str]) -> str:
    """A file whose reader extra is missing is skipped, counted and named with the extra that reads it; the
    rest is indexed (exit 0): one unreadable file never stops a run (issue 55, item 5)."""
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert f"{len(skipped)} missing extra" in out, out  # counted in the load summary's problems
    for name in skipped:
        line = next((ln for ln in out.splitlines() if ln.strip().startswith("skipped") and name in ln), None)
        assert line is not None, out  # named
        assert f"needs the {extra} extra" in line and f"pip install 'ragsieve[{extra}]'" in line, line
    return out


def test_html_and_websites_without_the_crawl_extra(docs, tmp_path):
    (docs / "cli-reference.html").write_bytes((EXAMPLES / "docs" / "cli-reference.html").read_bytes())
    out = assert_skipped_and_rest_indexed(
        cli_without("crawl", "index", str(docs), "--index", "idx", cwd=tmp_path), "crawl", ["cli-reference.html"]
    )
    assert "1 documents from 1 of 2 files" in out and "--exclude" in out
    search = cli_without("crawl", "search", "--index", "idx", "zorblax gateway port", "--json", cwd=tmp_path)
    assert search.returncode == 0 and "notes.md" in search.stdout, search.stderr[-2000:]  # the rest was indexed
    only = tmp_path / "only-html"
    only.mkdir()
    (only / "cli-reference.html").write_bytes((EXAMPLES / "docs" / "cli-reference.html").read_bytes())
    line = assert_one_line(cli_without("crawl", "index", str(only), "--index", "idx2", cwd=tmp_path), "crawl")
    assert "nothing to index" in line and "cli-reference.html" in line  # nothing else: the reason, in one line
    site = assert_one_line(cli_without("crawl", "index", "http://127.0.0.1:9/docs/", "--index", "idx", cwd=tmp_path), "crawl")
    assert "website" in site


def test_pdf_and_docx_without_the_documents_extra(docs, tmp_path):
    (docs / "policy.pdf").write_bytes(b"%PDF-1.4\n% not parsed: the reader is missing\n")
    out = assert_skipped_and_rest_indexed(
        cli_without("documents", "index", str(docs), "--index", "idx", cwd=tmp_path), "documents", ["policy.pdf"]
    )
    assert "1 documents from 1 of 2 files" in out
    code = "from pathlib import Path\nfrom ragsieve.tools.ingest.formats import read_docx\nread_docx(Path('a.docx'))"
    assert_names_extra(library_without("documents", code, tmp_path), "documents")


def test_code_without_the_code_extra(docs, tmp_path):
    """Code is cut by its syntax tree by default: without the grammars a code file is skipped, naming the code
    extra and --no-syntax; with --no-syntax it is cut by lines and indexed."""
    (docs / "tool.py").write_text("def zorblax_port():\n    return 7412\n", encoding="utf-8")
    out = assert_skipped_and_rest_indexed(
        cli_without("code", "index", str(docs), "--index", "idx", cwd=tmp_path), "code", ["tool.py"]
    )
    assert "--no-syntax" in out and "1 documents from 1 of 2 files" in out
    lines = cli_without("code", "index", str(docs), "--index", "idx-lines", "--no-syntax", cwd=tmp_path)
    assert lines.returncode == 0 and "2 documents from 2 of 2 files" in lines.stdout, lines.stderr[-2000:]


def test_a_reader_error_skips_the_file_and_indexes_the_rest(docs, tmp_path, monkeypatch):
    """Any failure of a reader library on one file (not only a missing extra) skips that file, named."""
    from ragsieve.tools.ingest import loaders

    (docs / "broken.html").write_text("<html><body>boom</body></html>", encoding="utf-8")

    def explode(text):
        raise ValueError("the parser choked")

    monkeypatch.setattr(loaders, "extract_page", explode)
    got = loaders.load_documents([docs])
    assert [d.doc_id.rsplit("/", 1)[-1] for d in got.documents] == ["notes.md"]
    assert got.stats.skipped_unreadable == 1
    assert any(p.endswith("broken.html") and "ValueError: the parser choked" in r for p, r in got.stats.problems())


def test_onnx_encoder_without_the_fast_extra(docs, tmp_path):
    """An explicit onnx encoder is refused without ONNX Runtime; the default falls back to torch (see
    test_encoder_default.py)."""
    line = assert_one_line(
        cli_without("fast", "index", str(docs), "--index", "idx", "--encoder", "onnx-int8", cwd=tmp_path), "fast"
    )
    assert "torch" in line
    code = "from ragsieve.tools.index.embedders.device import default_encoder\nassert default_encoder() == 'torch'"
    assert library_without("fast", code, tmp_path) == {"extra": None}


def test_embedded_llm_without_the_local_extra(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    code = f"from ragsieve.agent.llm.local_server import LocalLLMServer\nLocalLLMServer({str(gguf)!r})"
    assert_names_extra(library_without("local", code, tmp_path), "local")


def test_milvus_without_the_milvus_extra(docs, tmp_path):
    assert_one_line(cli_without("milvus", "index", str(docs), "--index", "idx", "--backend", "milvus", cwd=tmp_path), "milvus")
    code = "from ragsieve.tools.index.milvus.client import client_for\nclient_for('x.db')"
    assert_names_extra(library_without("milvus", code, tmp_path), "milvus")


def test_ray_without_the_ray_extra(docs, tmp_path):
    assert_one_line(cli_without("ray", "index", str(docs), "--index", "idx", "--ray", cwd=tmp_path), "ray")


def test_eval_without_the_eval_extra(tmp_path):
    assert_one_line(cli_without("eval", "eval", "scifact", "--index", "idx", cwd=tmp_path), "eval")
    code = "from pathlib import Path\nfrom ragsieve.eval.outputs import plot\nplot({'plans': {}}, Path('p'))"
    assert_names_extra(library_without("eval", code, tmp_path), "eval")
