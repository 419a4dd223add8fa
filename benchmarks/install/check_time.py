"""Cold `make check` time (ruff check, ruff format --check, mypy) of this checkout beside another commit's (issue 57).

    .venv/bin/python -m benchmarks.install.check_time [--before COMMIT] [--out benchmarks/results/check-time.json]

Each variant is the tree of one commit (`git archive`, so uncommitted changes do not count) in a temporary folder,
checked as `make check` checks it: `make typecheck-tree`, then the three gates with this venv's ruff and mypy and
no cache (ruff `--no-cache`, mypy a fresh `--cache-dir`). Recorded per gate: user and system CPU seconds of the
child (load-independent, unlike wall seconds, also recorded) and its exit status. The variants run one after the
other, `after` first.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from benchmarks.bench_io import REPO, RESULTS, header, write

BIN = Path(sys.executable).parent
GATES = {
    "ruff_check": [str(BIN / "ruff"), "check", "--no-cache", "."],
    "ruff_format": [str(BIN / "ruff"), "format", "--check", "--no-cache", "."],
    "mypy": [str(BIN / "mypy"), "--cache-dir", "{cache}"],
}


def _tree(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    subprocess.run(["make", "-s", "typecheck-tree"], cwd=into, check=True)
    return into


def _timed(command: list[str], cwd: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "user_s": round(after.ru_utime - before.ru_utime, 2),
        "system_s": round(after.ru_stime - before.ru_stime, 2),
        "wall_s": round(wall, 2),
        "returncode": done.returncode,
        "last_line": (done.stdout.strip().splitlines() or [""])[-1][:200],
    }


def measure(commit: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="ragsieve-check-") as tmp:
        tree = _tree(commit, Path(tmp) / "tree")
        gates = {
            name: _timed([part.replace("{cache}", str(Path(tmp) / "mypy-cache")) for part in command], tree)
            for name, command in GATES.items()
        }
    return {
        "commit": commit,
        "gates": gates,
        "user_s": round(sum(g["user_s"] for g in gates.values()), 2),
        "cpu_s": round(sum(g["user_s"] + g["system_s"] for g in gates.values()), 2),
        "wall_s": round(sum(g["wall_s"] for g in gates.values()), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="the commit to compare with (default main)")
    parser.add_argument("--out", type=Path, default=RESULTS / "check-time.json")
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    base = subprocess.run(["git", "rev-parse", args.before], cwd=REPO, capture_output=True, text=True, check=True).stdout
    result = header(measures=["pyproject.toml", "Makefile", "agent", "tools", "ragsieve", "prompts"])
    after, before = measure(head), measure(base.strip())
    result |= {
        "after": after,
        "before": before,
        "user_ratio_after_to_before": round(after["user_s"] / before["user_s"], 3) if before["user_s"] else None,
    }
    return write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
