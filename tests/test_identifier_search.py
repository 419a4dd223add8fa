"""Identifier-aware search on a real index (embedded MiniLM, hybrid retrieval) of CPython code and three Python
doc pages: a query naming a function finds its definition first, the README's own question finds
`HTTPResponse._read_chunked`, and `where symbol_kind` admits only chunks defining that kind."""
from __future__ import annotations

import gzip
import shutil
import sysconfig
from pathlib import Path

import pytest

from ragsieve.agent.config import Config
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.tools.index.builder import IndexBuilder
from ragsieve.tools.index.symbols import definitions_in
from ragsieve.tools.index.where import Where

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PAGES = Path(__file__).parent / "fixtures" / "pydocs"


@pytest.fixture(scope="module")
def sources_index(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("sources")
    for rel in ("http/client.py", "asyncio/tasks.py"):
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(STDLIB / rel, root / "src" / rel)
    (root / "src" / "docs").mkdir()
    for name in ("re", "functools", "secrets"):
        (root / "src" / "docs" / f"{name}.html").write_text(
            gzip.open(PAGES / f"{name}.html.gz", "rt", encoding="utf-8").read(), encoding="utf-8")
    IndexBuilder(root / "idx", embedder=embedder, progress=False).build([root / "src"])
    return root / "idx"


def test_named_definitions_rank_first(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        for query, where in (("token_urlsafe", "#secrets.token_urlsafe"), ("re.search", "#re.search"),
                             ("What does functools.lru_cache do?", "#functools.lru_cache"),
                             ("HTTPResponse._read_chunked", "def _read_chunked"),
                             ("how does wait_for cancel the task on timeout", "async def wait_for")):
            top = orch.retrieve(query, top_k=5)[0]
            assert where in (top.chunk.symbol + top.chunk.text), (query, top.chunk.symbol)
            assert top.extra.get("symbol") == 1.0
        off = Orchestrator.open(sources_index, Config.model_validate({"retrieval": {"symbols": False}}))
        with off:
            assert all(not h.extra.get("symbol") for h in off.retrieve("token_urlsafe", top_k=5))


def test_readme_question_finds_read_chunked(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        hits = orch.retrieve("where does http.client read a chunked response body?", top_k=5)
        assert any(h.chunk.symbol.endswith("HTTPResponse._read_chunked") for h in hits), [h.chunk.symbol for h in hits]


def test_where_symbol_kind_admits_only_defining_chunks(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        retriever = orch.retriever.with_filter(Where(symbol_kind="class"))
        hits = retriever.run("response", top_k=10)
        assert hits and all("class" in [k for _, k in definitions_in(h.chunk)] for h in hits)
        names = {n for h in hits for n, _ in definitions_in(h.chunk)}
        assert "HTTPResponse" in names
