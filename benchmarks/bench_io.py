"""What every benchmark records: the command, the machine, the load average, and the JSON it writes."""
from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from pathlib import Path


def commit() -> str:
    """The checkout's commit, with "+dirty" when tracked files differ from it ("unknown" outside git); result files
    (`benchmarks/results/`, `benchmarks/REPORT.md`) are outputs, not code, and do not count: a run started while
    another run's result is not yet committed still ran the committed code."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results", ":(exclude)benchmarks/REPORT.md"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def header() -> dict:
    return {"command": "python " + shlex.join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]), "commit": commit(),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
            "load_average_at_start": os.getloadavg()}


def write(result: dict, out: Path) -> int:
    """Add the load average at the end, write `out` (folders made), say so; 0 for `sys.exit`."""
    result["load_average_at_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {out}")
    return 0
