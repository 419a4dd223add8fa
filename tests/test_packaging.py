"""The wheel holds one import package, `ragsieve`, and works installed outside the repository.

The wheel is built from the repo, then installed (without dependencies) into a fresh
venv whose dependencies come from this test environment's site-packages through a
`.pth` line: only the wheel provides `ragsieve`. Everything then runs from a folder
outside the repository, so nothing can be imported from the source tree by accident.
"""
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

OLD_TOP_LEVEL = re.compile(r"^\s*(from|import)\s+(agent|tools|prompts)(\.|\s|$)", re.MULTILINE)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(REPO)], check=True, capture_output=True, timeout=300)
    wheels = list(out.glob("ragsieve-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    return env_dir / "bin"


def test_wheel_holds_only_the_ragsieve_package_and_every_prompt(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    outside = {n for n in names if not n.startswith(("ragsieve/", "ragsieve-"))}
    assert outside == set()
    for template in (REPO / "prompts").glob("*.j2"):
        assert f"ragsieve/prompts/{template.name}" in names
    for module in ("agent/cli/main.py", "agent/steps/answer.py", "agent/plan/state.py", "tools/index/retriever.py",
                   "tools/ingest/loaders.py", "tools/filters/conformal.py"):
        assert f"ragsieve/{module}" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ragsieve = ragsieve.agent.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_runs_outside_the_repo(installed, tmp_path):
    """`ragsieve --help`, an index build and a retrieval-only call, from a folder outside the repo."""
    help_out = subprocess.run([str(installed / "ragsieve"), "--help"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120, check=True).stdout
    assert "index" in help_out and "ask" in help_out
    old = subprocess.run([str(installed / "python"), "-c", "import agent"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert old.returncode != 0 and "No module named 'agent'" in old.stderr
    old_tools = subprocess.run([str(installed / "python"), "-c", "import tools"], capture_output=True, text=True,
                               cwd=tmp_path, timeout=60)
    assert old_tools.returncode != 0
    built = subprocess.run([str(installed / "ragsieve"), "index", str(EXAMPLES / "docs"), "--index", "idx"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert built.returncode == 0, built.stderr
    code = ("import ragsieve, sys; from ragsieve import Orchestrator, Config, Answer; "
            "from ragsieve.tools.index.hybrid import HybridIndex; "
            "from ragsieve.tools.index.retriever import HybridRetriever; "
            "from ragsieve.agent.llm.templates import PromptRenderer; "
            "print(ragsieve.__file__); print(' '.join(PromptRenderer().names())); "
            "ix = HybridIndex.open('idx'); hits = HybridRetriever(ix).run('rotate the API key', top_k=3); "
            "print(hits[0].chunk.source)")
    result = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    where, templates, top_source = result.stdout.splitlines()[-3:]
    assert "site-packages" in where and str(REPO) not in where
    assert "answer" in templates.split()
    assert top_source.endswith("api-keys.md")


def test_no_module_imports_the_old_top_level_names():
    """Code imports `ragsieve.*` only: `import agent` would work in the repo and fail once installed."""
    offenders = []
    for folder in ("ragsieve", "agent", "tools", "prompts", "tests", "benchmarks", "examples"):
        for path in (REPO / folder).rglob("*.py"):
            for match in OLD_TOP_LEVEL.finditer(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(REPO)}: {match.group(0).strip()}")
    assert offenders == []


def test_wheel_ships_the_assistant_assets_with_their_licences(wheel, installed, tmp_path):
    """The chat page and widget need no build step: our scripts and the vendored libraries are in the wheel."""
    names = set(zipfile.ZipFile(wheel).namelist())
    web = "ragsieve/agent/service/web/static/"
    for asset in ("chat.html", "chat.css", "conversation.css", "source.css", "core.js", "trace.js", "page.js",
                  "widget.js", "insights.html", "insights.css", "insights.js",
                  "vendor/purify.min.js", "vendor/marked.umd.js", "vendor/LICENSE-dompurify.txt",
                  "vendor/LICENSE-dompurify-MPL.txt", "vendor/LICENSE-marked.txt", "vendor/README.md"):
        assert web + asset in names
    code = ("from ragsieve.agent.service.web import assets; b = assets.bundle('widget.js'); "
            "print(len(b), 'DOMPurify' in b, 'attachShadow' in b, 'MIT' in assets.licenses())")
    result = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    size, *flags = result.stdout.split()
    assert int(size) > 50_000 and flags == ["True", "True", "True"]
