"""The gates themselves: ruff and mypy fail on a planted fault and pass on the tree, and the checker holds
both index backends to `IndexBackend` (tests of the gates, not of the code they check)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("ruff")
pytest.importorskip("mypy")


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _mypy_config(tmp: Path, mypy_path: Path) -> Path:
    """The project's pyproject.toml ([tool.mypy]: its level, plugins, options) pointed at `mypy_path`."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    text, found = re.subn(r"(?m)^mypy_path = .*$", f"mypy_path = {str(mypy_path)!r}", text)
    assert found == 1, "[tool.mypy] mypy_path not found in pyproject.toml"
    config = tmp / "pyproject.toml"
    config.write_text(text, encoding="utf-8")
    return config


def _mypy(config: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(config.parent / "mypy-cache"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _mini_tree(tmp: Path) -> Path:
    """A two-module copy of the package (`ragsieve.tools.errors`, `ragsieve.tools.modes`) for mypy to check."""
    tree = tmp / "tree"
    package = tree / "ragsieve" / "tools"
    package.mkdir(parents=True)
    (tree / "ragsieve" / "__init__.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in ("errors.py", "modes.py"):
        shutil.copy(ROOT / "tools" / name, package / name)
    return tree


def test_the_tree_passes_ruff():
    done = _ruff(".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_fails_on_a_planted_undefined_name(tmp_path):
    planted = tmp_path / "modes.py"
    shutil.copy(ROOT / "tools" / "modes.py", planted)
    clean = _ruff("--config", str(ROOT / "pyproject.toml"), str(planted), cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout  # the copy as it is passes: the failure below is the plant's
    # the fault issue 43 names: a `raise` of an error class whose import the split left behind
    planted.write_text(
        planted.read_text(encoding="utf-8") + '\n\ndef refuse() -> None:\n    raise IndexMissingError("no index")\n',
        encoding="utf-8",
    )
    done = _ruff("--config", str(ROOT / "pyproject.toml"), str(planted), cwd=tmp_path)
    assert done.returncode == 1 and "F821" in done.stdout and "IndexMissingError" in done.stdout, done.stdout


def test_mypy_fails_on_a_planted_type_error(tmp_path):
    tree = _mini_tree(tmp_path)
    config = _mypy_config(tmp_path, tree)
    clean = _mypy(config, "-p", "ragsieve", cwd=tmp_path)
    assert clean.returncode == 0 and "Success" in clean.stdout, clean.stdout + clean.stderr
    modes = tree / "ragsieve" / "tools" / "modes.py"
    modes.write_text(
        modes.read_text(encoding="utf-8") + "\n\ndef fusion_of(name: str) -> FusionMode:\n"
        '    return parse_enum(FaissKind, name, "fusion mode")\n',
        encoding="utf-8",
    )
    done = _mypy(config, "-p", "ragsieve", cwd=tmp_path)
    assert done.returncode == 1 and "modes.py" in done.stdout and "[return-value]" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "plant, code",
    [
        ("def untyped(x):\n    return x\n", "[no-untyped-def]"),  # disallow_untyped_defs in tools/
        ("import tomllib\n", "[import-not-found]"),  # the target is Python 3.10, which has no tomllib
        ("import ragsieve_no_such_module\n", "[import-not-found]"),  # no global ignore_missing_imports
    ],
)
def test_mypy_fails_on_what_the_project_settings_refuse(tmp_path, plant, code):
    tree = _mini_tree(tmp_path)
    config = _mypy_config(tmp_path, tree)
    modes = tree / "ragsieve" / "tools" / "modes.py"
    modes.write_text(modes.read_text(encoding="utf-8") + "\n\n" + plant, encoding="utf-8")
    done = _mypy(config, "-p", "ragsieve", cwd=tmp_path)
    assert done.returncode == 1 and "modes.py" in done.stdout and code in done.stdout, done.stdout


def _link_tree() -> None:
    """`make typecheck-tree`: build/typecheck/ragsieve mirrors the installed `ragsieve` namespace."""
    tree = ROOT / "build" / "typecheck" / "ragsieve"
    if (tree / "agent").is_dir() and (tree / "__init__.py").is_file():
        return
    subprocess.run(["make", "-s", "typecheck-tree"], cwd=ROOT, check=True, timeout=60)


def test_the_checker_holds_both_index_backends_to_the_protocol(tmp_path):
    """`HybridIndex` and `MilvusIndex` typed as `IndexBackend`: mypy (the project's configuration and cache,
    over the real tree) accepts them, and refuses a class that lacks the members (so the acceptance is the
    protocol's, not an Any)."""
    _link_tree()
    check = tmp_path / "check_backends.py"
    check.write_text(
        "from ragsieve.tools.index.backend import IndexBackend\n"
        "from ragsieve.tools.index.local.index import HybridIndex\n"
        "from ragsieve.tools.index.milvus.index import MilvusIndex\n\n\n"
        "def backends(local: HybridIndex, remote: MilvusIndex) -> list[IndexBackend]:\n"
        "    return [local, remote]\n",
        encoding="utf-8",
    )
    run = [sys.executable, "-m", "mypy", str(check)]  # the options `make lint` uses: its cache stays valid
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout + done.stderr
    check.write_text(
        check.read_text(encoding="utf-8") + "\n\nclass NoVectors:\n    store = None\n\n\n"
        "def partial(x: NoVectors) -> IndexBackend:\n    return x\n",
        encoding="utf-8",
    )
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "IndexBackend" in done.stdout and "[return-value]" in done.stdout, done.stdout
