"""The wheel holds one import package, `ragsieve`, with every package folder of the tree, and works installed
outside the repository.

Wheels are built from a clean copy of the tree (`dist_build`): one by `pip wheel .`, one from the sdist by
`python -m build`. The sdist-built wheel is then installed (without dependencies) into a fresh venv whose
dependencies come from this test environment's site-packages through a `.pth` line: only the wheel provides
`ragsieve`. Everything then runs from a folder outside the repository, so nothing can be imported from the
source tree by accident. (`test_release.py` installs the wheel with its real dependencies.)
"""

import re
import subprocess
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO
from tests.support.dist_build import (
    build_sdist_and_wheel,
    copy_tree,
    folders_missing_from,
    modules_missing_from,
    package_folders,
    pip_wheel,
    requires_dist,
)
from tests.support.release_venv import SURFACE_PACKAGES

OLD_TOP_LEVEL = re.compile(r"^\s*(from|import)\s+(agent|tools|prompts)(\.|\s|$)", re.MULTILINE)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return copy_tree(tmp_path_factory.mktemp("tree") / "ragsieve-src")


@pytest.fixture(scope="module")
def built(tree, tmp_path_factory):
    """(sdist, wheel built from the sdist)."""
    return build_sdist_and_wheel(tree, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def wheel(built):
    return built[1]


@pytest.fixture(scope="module")
def tree_wheel(tmp_path_factory):
    """`pip wheel .` in its own copy (an in-tree build leaves build/ and *.egg-info behind)."""
    source = copy_tree(tmp_path_factory.mktemp("tree-for-pip") / "ragsieve-src")
    return pip_wheel(source, tmp_path_factory.mktemp("pip-wheel"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return env_dir / "bin"


def test_every_package_folder_is_in_both_wheels(tree, wheel, tree_wheel):
    """Each folder of .py files under ragsieve/, agent/, tools/ (and prompts/) ships, every module in it, with
    the prompts and web assets: from the tree (`pip wheel .`) and from the sdist (`python -m build`)."""
    assert "ragsieve/service/documents" in package_folders(tree)  # the folder the hand-kept list lacked
    assets = {f"ragsieve/prompts/{p.name}" for p in (tree / "prompts").glob("*.j2")}
    assets |= {p.relative_to(tree).as_posix() for p in (tree / "ragsieve/service/web/static").rglob("*") if p.is_file()}
    assert len(assets) > 20
    for built_wheel in (tree_wheel, wheel):
        assert folders_missing_from(built_wheel, tree) == []
        assert modules_missing_from(built_wheel, tree) == []
        assert assets - set(zipfile.ZipFile(built_wheel).namelist()) == set()  # prompts and web assets


def test_a_new_subpackage_ships_with_no_configuration_change(tmp_path):
    """Packages are discovered: a folder added under agent/ or ragsieve/ is in the next wheel, and one without
    its `__init__.py` is reported missing (the check can fail)."""
    source = copy_tree(tmp_path / "src")
    (source / "ragsieve" / "planted_front").mkdir()
    (source / "ragsieve" / "planted_front" / "__init__.py").write_text('"""A planted front end."""\n')
    (source / "agent" / "planted").mkdir()
    (source / "agent" / "planted" / "__init__.py").write_text('"""A planted sub-package."""\n')
    (source / "agent" / "planted" / "thing.py").write_text("VALUE = 1\n")
    (source / "tools" / "no_init").mkdir()
    (source / "tools" / "no_init" / "orphan.py").write_text("VALUE = 2\n")
    built_wheel = pip_wheel(source, tmp_path / "out")
    names = set(zipfile.ZipFile(built_wheel).namelist())
    assert "ragsieve/agent/planted/thing.py" in names and "ragsieve/planted_front/__init__.py" in names
    assert folders_missing_from(built_wheel, source) == ["ragsieve/tools/no_init"]


def test_sdist_carries_the_sources_prompts_and_web_assets(built, tree):
    sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    wanted = {
        path.relative_to(tree).as_posix()
        for top in ("agent", "tools", "prompts", "ragsieve")
        for path in (tree / top).rglob("*")
        if path.is_file()
    }
    wanted = {rel for rel in wanted if rel.endswith((".py", ".j2")) or "/web/static/" in rel}
    assert len(wanted) > 200 and sorted(wanted - names) == []
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md"} <= names


def test_the_wheel_alone_requires_no_surface_package(wheel):
    """`pip install ragsieve` is the library: servers, MCP, crawling, plots and ONNX Runtime are extras."""
    required = {re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-") for req in requires_dist(wheel)}
    assert {"openai", "numpy", "faiss-cpu", "sentence-transformers", "jinja2"} <= required
    assert required & SURFACE_PACKAGES == set()


def test_wheel_holds_only_the_ragsieve_package_and_every_prompt(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    outside = {n for n in names if not n.startswith(("ragsieve/", "ragsieve-"))}
    assert outside == set()
    for template in (REPO / "prompts").glob("*.j2"):
        assert f"ragsieve/prompts/{template.name}" in names
    for module in (
        "__main__.py",
        "cli/main.py",
        "service/mcp/server.py",
        "agent/steps/answer.py",
        "agent/core/state.py",
        "tools/index/query/retriever.py",
        "tools/ingest/loaders.py",
        "tools/filters/conformal.py",
    ):
        assert f"ragsieve/{module}" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ragsieve = ragsieve.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_runs_outside_the_repo(installed, tmp_path):
    """`ragsieve --help`, an index build and a retrieval-only call, from a folder outside the repo."""
    help_out = subprocess.run(
        [str(installed / "ragsieve"), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=True
    ).stdout
    assert "index" in help_out and "ask" in help_out
    as_module = subprocess.run(
        [str(installed / "python"), "-m", "ragsieve", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    ).stdout
    assert as_module == help_out
    old = subprocess.run(
        [str(installed / "python"), "-c", "import agent"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert old.returncode != 0 and "No module named 'agent'" in old.stderr
    old_tools = subprocess.run(
        [str(installed / "python"), "-c", "import tools"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert old_tools.returncode != 0
    built = subprocess.run(
        [str(installed / "ragsieve"), "index", str(EXAMPLES / "docs"), "--index", "idx"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    code = (
        "import ragsieve, sys; from ragsieve import Orchestrator, Config, Answer; "
        "from ragsieve.tools.index.local.index import HybridIndex; "
        "from ragsieve.tools.index.query.retriever import HybridRetriever; "
        "from ragsieve.agent.llm.templates import PromptRenderer; "
        "print(ragsieve.__file__); print(' '.join(PromptRenderer().names())); "
        "ix = HybridIndex.open('idx'); hits = HybridRetriever(ix).run('rotate the API key', top_k=3); "
        "print(hits[0].chunk.source)"
    )
    result = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
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
    web = "ragsieve/service/web/static/"
    for asset in (
        "chat.html",
        "chat.css",
        "conversation.css",
        "source.css",
        "core.js",
        "trace.js",
        "page.js",
        "widget.js",
        "insights.html",
        "insights.css",
        "insights.js",
        "vendor/purify.min.js",
        "vendor/marked.umd.js",
        "vendor/LICENSE-dompurify.txt",
        "vendor/LICENSE-dompurify-MPL.txt",
        "vendor/LICENSE-marked.txt",
        "vendor/README.md",
    ):
        assert web + asset in names
    code = (
        "from ragsieve.service.web import assets; b = assets.bundle('widget.js'); "
        "print(len(b), 'DOMPurify' in b, 'attachShadow' in b, 'MIT' in assets.licenses())"
    )
    result = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    size, *flags = result.stdout.split()
    assert int(size) > 50_000 and flags == ["True", "True", "True"]
