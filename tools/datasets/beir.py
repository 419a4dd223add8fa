"""Readers for the BEIR dataset layout (Thakur et al. 2021): `queries.jsonl` and `qrels/*.tsv`.

One place parses them for `ragsieve eval`, `ragsieve calibrate --qrels` and the
benchmarks; every malformed line is refused with its file and line number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import UsageError


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every non-blank line of a JSON-lines file, each an object."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise UsageError(f"{path}:{number}: expected a JSON object")
        records.append(record)
    return records


def read_queries(path: str | Path) -> dict[str, str]:
    """Query id -> text from a BEIR `queries.jsonl` (`_id`, `text`)."""
    texts: dict[str, str] = {}
    for number, record in enumerate(read_jsonl(path), start=1):
        if "_id" not in record or not isinstance(record.get("text"), str):
            raise UsageError(f"{path}: record {number} is not a BEIR query with _id and text")
        texts[str(record["_id"])] = record["text"]
    return texts


def read_qrels(path: str | Path) -> dict[str, dict[str, float]]:
    """Query id -> {corpus id: grade} from a BEIR qrels tsv (`query-id<TAB>corpus-id<TAB>score`,
    first line may be a header). Grades are kept as read (0 included); integral ones as int."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    qrels: dict[str, dict[str, float]] = {}
    for number, line in enumerate(lines, start=1):
        parts = line.rstrip("\r").split("\t")
        if not line.strip():
            continue
        if len(parts) < 3:
            raise UsageError(f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            grade = float(parts[2])
        except ValueError:
            if number == 1:
                continue  # the header line
            raise UsageError(f"{path}:{number}: score {parts[2]!r} is not a number") from None
        if not math.isfinite(grade):
            raise UsageError(f"{path}:{number}: score {parts[2]!r} is not a finite number")
        qrels.setdefault(parts[0], {})[parts[1]] = int(grade) if grade.is_integer() else grade
    return qrels
