"""Reading benchmarks/results/*.json for the report, and the table and row helpers every section shares:
`load` (a pipeline result of an earlier plan comes back without its data), `command` and `machine` (what a row
names), `fmt` and `table` (Markdown), `generic_file`/`generic_section` (every figure of a file without its own
section).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from report_plan import predating_note, result_predates, since_for

REPO = Path(__file__).resolve().parent.parent

SKIP = {"filter", "machine", "versions", "config", "rows", "index", "command", "settings", "dataset", "llm", "per_question",
        "plots", "started", "elapsed_s", "questions_worse_both_gold@5", "questions_better_both_gold@5"}


def load(folder: Path, pattern: str) -> list[tuple[Path, dict[str, Any] | None, str]]:
    """(path, data or None, error) for each file matching `pattern`, sorted by name; a pipeline result that ran
    an earlier `full` plan (`report_plan`) comes back without its data, the reason as its error."""
    found = []
    for path in sorted(folder.glob(pattern)):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                found.append((path, None, "not an object"))
            elif path.name.startswith("pipeline-") and result_predates(data):
                found.append((path, None, predating_note(str(data["commit"]), since_for(data))))  # an earlier plan's
            else:
                found.append((path, data, ""))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            found.append((path, None, str(exc)))
    return found


def machine(data: dict[str, Any]) -> str:
    m = data.get("machine") or {}
    if not isinstance(m, dict) or not m:
        return "unknown machine"
    cpus = m.get("cpus") or m.get("nproc")
    parts = [m.get("cpu") or m.get("platform") or "", f"{cpus} cpus" if cpus else "", f"Python {m['python']}" if m.get("python") else ""]
    return ", ".join(p for p in parts if p)


def command(data: dict[str, Any]) -> str:
    """The recorded command with the checkout's own path left out (any checkout: a worktree's venv path too)."""
    cmd = data.get("command")
    if not cmd:
        return "(no command recorded)"
    return "`" + re.sub(r"\S*/(\.venv/bin/)", r"\1", str(cmd).replace(str(REPO) + "/", "")) + "`"


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    if isinstance(value, (list, dict)):
        return f"{len(value)} items"
    return str(value)


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return lines + [""]


def is_scifact(data: dict[str, Any]) -> bool:
    where = data.get("dataset")
    where = where.get("folder", "") if isinstance(where, dict) else str(where or "")
    return "scifact" in where.lower()


def command_at(data: dict[str, Any]) -> str:
    """The command and the commit it ran at (or that none was recorded)."""
    return f"{command(data)} " + (f"at {str(data['commit'])[:7]}" if data.get("commit") else "(no commit recorded)")


def flatten(obj: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """(path, {metric: number}) for every dict of scalars under `obj` (skipping settings-like keys)."""
    if not isinstance(obj, dict) or depth > 4:
        return []
    scalars = {k: v for k, v in obj.items() if isinstance(v, (int, float, bool)) or v is None}
    out = [(prefix or "(top level)", scalars)] if scalars and any(v is not None for v in scalars.values()) else []
    for key, value in obj.items():
        if key not in SKIP and isinstance(value, dict):
            out += flatten(value, f"{prefix}/{key}" if prefix else key, depth + 1)
    return out


def generic_file(path: Path, data: dict[str, Any] | None, error: str = "") -> list[str]:
    """Every dict of figures in one results file, each row naming the file's command and machine."""
    lines = [f"### {path.name}", ""]
    if data is None:
        return lines + [f"unreadable: {error}", ""]
    groups = flatten({k: v for k, v in data.items() if k not in SKIP})
    if not groups:
        return lines + [f"(no figures found; command {command(data)}, machine {machine(data)})", ""]
    keys = sorted({k for _, g in groups for k in g})
    if len(keys) > 10:  # too wide for one table: one line per group
        lines += [f"- {name}: " + ", ".join(f"{k} {fmt(v)}" for k, v in g.items())
                  + f" — {command(data)} on {machine(data)}" for name, g in groups]
        return lines + [""]
    return lines + table(["group"] + keys + ["command", "machine"],
                         [[name] + [g.get(k) for k in keys] + [command(data), machine(data)] for name, g in groups])


def generic_section(title: str, folder: Path, pattern: str) -> list[str]:
    lines = [f"## {title}", ""]
    files = load(folder, pattern)
    if not files:
        return lines + [f"not run (no benchmarks/results/{pattern}).", ""]
    for path, data, error in files:
        lines += generic_file(path, data, error)
    return lines
