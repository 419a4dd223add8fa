"""Building ragsieve's sdist and wheels from a clean copy of the tree, for the packaging and release tests.

The copy holds only what a build reads (the packages, pyproject.toml, setup.py, MANIFEST.in, README.md), so a
stale `build/lib` of the checkout can never fill in a package the configuration leaves out. Builds run without
isolation (offline): the dev extra's `build` and `setuptools` are the backend.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO

BUILD_INPUTS = ("agent", "tools", "prompts", "ragsieve", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
# the import name of each folder that becomes a package (pyproject's package-dir)
NAMESPACE = {"ragsieve": "ragsieve", "agent": "ragsieve/agent", "tools": "ragsieve/tools", "prompts": "ragsieve/prompts"}


def copy_tree(dest: Path, source: Path = REPO) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in BUILD_INPUTS:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.is_file():
            shutil.copy2(path, dest / name)
    return dest


def build_sdist_and_wheel(source: Path, out: Path) -> tuple[Path, Path]:
    """`python -m build`: the sdist, then the wheel built from that sdist (not from the tree)."""
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,), (wheel,) = list(out.glob("ragsieve-*.tar.gz")), list(out.glob("ragsieve-*.whl"))
    return sdist, wheel


def pip_wheel(source: Path, out: Path) -> Path:
    """`pip wheel .`: the wheel built from the tree, as a user does in a checkout."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = list(out.glob("ragsieve-*.whl"))
    return wheel


def package_folders(source: Path = REPO) -> set[str]:
    """Every folder holding .py files under ragsieve/, agent/, tools/, prompts/, as its path in the wheel."""
    folders = set()
    for top, installed in NAMESPACE.items():
        for module in (source / top).rglob("*.py"):
            rel = module.parent.relative_to(source / top)
            folders.add(installed if rel == Path(".") else f"{installed}/{rel.as_posix()}")
    return folders


def folders_missing_from(wheel: Path, source: Path = REPO) -> list[str]:
    """The package folders of `source` of which the wheel holds no module (its `__init__.py` and the rest)."""
    names = zipfile.ZipFile(wheel).namelist()
    held = {name.rsplit("/", 1)[0] for name in names if name.endswith(".py")}
    return sorted(package_folders(source) - held)


def modules_missing_from(wheel: Path, source: Path = REPO) -> list[str]:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for top, installed in NAMESPACE.items():
        for module in (source / top).rglob("*.py"):
            if f"{installed}/{module.relative_to(source / top).as_posix()}" not in names:
                missing.append(str(module.relative_to(source)))
    return sorted(missing)


def requires_dist(wheel: Path) -> list[str]:
    """The wheel's METADATA `Requires-Dist` lines that apply without any extra."""
    archive = zipfile.ZipFile(wheel)
    metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    lines = archive.read(metadata).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:") and "extra ==" not in line]
