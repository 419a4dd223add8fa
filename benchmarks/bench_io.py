"""What every benchmark records: the command, the machine, the load average, and the JSON it writes."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
SCIFACT = REPO.parent / "shared" / "data" / "scifact"  # the shared sets (BEIR layout) live beside the checkout


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds of this process (or of its waited-for children: `resource.RUSAGE_CHILDREN`)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def percentile(values: list[float], q: float) -> float | None:
    """The sorted value nearest the `q` quantile (0..1), no interpolation; None for no values."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else None


def corpus_slice(out: Path, n_docs: int | None, corpus: Path = SCIFACT / "corpus.jsonl.gz") -> Path:
    """The first `n_docs` lines (all for None) of a gzipped JSON-lines corpus, written to `out` (folders made)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(corpus, "rt", encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        dst.writelines(itertools.islice(src, n_docs))
    return out


def commit() -> str:
    """The checkout's commit, with "+dirty" when tracked files differ from it ("unknown" outside git); result files
    (`benchmarks/results/`, `benchmarks/REPORT.md`) are outputs, not code, and do not count: a run started while
    another run's result is not yet committed still ran the committed code."""
    root = REPO
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)benchmarks/results",
                ":(exclude)benchmarks/REPORT.md",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def invocation() -> str:
    """How this run was started: `python -m benchmarks.family.module ARGS` under `-m`, else `python PATH ARGS`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    start = ["-m", name.removesuffix(".__main__")] if name else [Path(sys.argv[0]).as_posix()]
    return "python " + shlex.join(start + sys.argv[1:])


def header(measures: list[str] | None = None, device: str = "cpu") -> dict:
    """The result's header. `measures`: the repository paths (files or folders, relative to the root) whose code the
    result measures, defaults included; the report calls the result stale once any of them changed after `commit`."""
    head = {
        "command": invocation(),
        "commit": commit(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "device": device,
        "load_average_at_start": os.getloadavg(),
    }
    if measures is not None:
        head["measures"] = sorted(set(measures))
    return head


def write(result: dict, out: Path) -> int:
    """Add the load average at the end, write `out` (folders made), say so; 0 for `sys.exit`."""
    result["load_average_at_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {out}")
    return 0


def write_rows(rows: list[dict], out: Path) -> Path:
    """Per-question detail beside a summary: gzip-compressed JSON lines at `out` (".jsonl.gz" is added when missing),
    written with a fixed mtime so the same rows give the same bytes."""
    path = out if out.name.endswith(".jsonl.gz") else out.with_name(out.name.removesuffix(".jsonl") + ".jsonl.gz")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode("utf-8"))
    return path


def read_rows(path: Path) -> list[dict]:
    """The rows `write_rows` wrote (or a plain ".jsonl" file)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
