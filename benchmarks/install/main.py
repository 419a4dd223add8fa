"""Install size and time of the lean core beside the install before the extras (issue 43).

    .venv/bin/python -m benchmarks.install.main [--out benchmarks/results/install-size.json]

Builds the wheel from a clean copy of the tree, then for each variant makes a fresh venv outside the
repository, installs CPU torch first (as `make` does: a bare `torch` pulls a CUDA build), then the wheel:
- `core`: the wheel alone (`pip install ragsieve`);
- `before`: the wheel with the extras whose packages were all core dependencies before the split
  (server, mcp, crawl, documents, code, fast, eval: the same package set `pip install ragsieve` pulled at
  535ead1), i.e. today's full install.
Each records the pip time of torch and of the wheel, the venv's site-packages size (and torch's share), and
the packages installed. Every package comes from local files (this machine's package mirror, in pip's config,
recorded with pip's cache size): the times are of a warm, local install, not of downloads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from benchmarks.bench_io import header, write

ROOT = Path(__file__).resolve().parents[2]
TORCH = "torch==2.13.0"
BUILD_INPUTS = ("agent", "tools", "prompts", "ragsieve", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
VARIANTS = {"core": "", "before": "[server,mcp,crawl,documents,code,fast,eval]"}


def build_wheel(work: Path) -> Path:
    src = work / "src"
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "-o", str(work / "dist"), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = (work / "dist").glob("ragsieve-*.whl")
    return wheel


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pip_install(python: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    started = time.monotonic()
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        check=True,
        capture_output=True,
        env=env,
        timeout=1800,
    )
    return round(time.monotonic() - started, 1)


def measure(work: Path, wheel: Path, name: str, extras: str) -> dict:
    target = work / f"venv-{name}"
    started = time.monotonic()
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    venv_s = round(time.monotonic() - started, 1)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    empty = folder_bytes(site)
    torch_s = pip_install(python, TORCH)
    wheel_s = pip_install(python, f"{wheel}{extras}")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True)
    packages = sorted(p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout))
    size = folder_bytes(site) - empty
    torch_bytes = folder_bytes(site / "torch") if (site / "torch").is_dir() else 0
    shutil.rmtree(target)
    return {
        "install": f"pip install {TORCH}; pip install ragsieve{extras}",
        "venv_s": venv_s,
        "torch_pip_s": torch_s,
        "wheel_pip_s": wheel_s,
        "site_packages_mb": round(size / 1e6, 1),
        "site_packages_without_torch_mb": round((size - torch_bytes) / 1e6, 1),
        "packages": len(packages),
        "package_names": packages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "install-size.json"))
    args = parser.parse_args()
    result = header()
    cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True).stdout.strip()
    cache_mb = round(folder_bytes(Path(cache)) / 1e6, 1) if cache and Path(cache).is_dir() else 0.0
    sources = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    result["pip_cache"] = {
        "dir": cache,
        "mb_at_start": cache_mb,
        "pip_config": sources.strip().splitlines(),
        "note": "warm in effect: every package is read from local files (the machine's mirror: pip's find-links "
        "folder and file:// indexes in pip_config), installed here before; pip's own cache holds only "
        "what those do not (mb_at_start). The times are of local installs, no download",
    }
    result["device"] = "CPU only (torch CPU wheel); no GPU"
    with tempfile.TemporaryDirectory(prefix="ragsieve-install-size-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        wheel = build_wheel(work)
        result["build_wheel_s"] = round(time.monotonic() - started, 1)
        result["variants"] = {name: measure(work, wheel, name, extras) for name, extras in VARIANTS.items()}
    core, before = result["variants"]["core"], result["variants"]["before"]
    result["core_vs_before"] = {
        "site_packages_mb": [core["site_packages_mb"], before["site_packages_mb"]],
        "site_packages_without_torch_mb": [core["site_packages_without_torch_mb"], before["site_packages_without_torch_mb"]],
        "wheel_pip_s": [core["wheel_pip_s"], before["wheel_pip_s"]],
        "packages": [core["packages"], before["packages"]],
        "only_in_before": sorted(set(before["package_names"]) - set(core["package_names"])),
    }
    return write(result, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
