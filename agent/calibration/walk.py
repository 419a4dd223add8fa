"""One calibration question's record: the walk down the similarity ranking to its first answer-bearing chunk,
and the hybrid signal of its best-known positive."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ragsieve.agent.calibration.store import CalibrationRecord
from ragsieve.tools.filters.conformal import ranks_of

SIZE_DEPTH = 1000  # similarities kept per held-out query to measure set sizes


def top_similarities(sims: np.ndarray) -> np.ndarray:
    """The SIZE_DEPTH largest similarities (enough to count a query's kept set), best first."""
    if sims.size > SIZE_DEPTH:
        sims = np.partition(sims, sims.size - SIZE_DEPTH)[-SIZE_DEPTH:]
    return np.sort(sims)[::-1]


def add_hybrid(record: CalibrationRecord, hybrid: np.ndarray | None, known: set[int | None]) -> CalibrationRecord:
    """The record with the hybrid signal of its best-known positive (by that signal), its top-1 and rank."""
    rows = {int(r) for r in known if r is not None}
    if hybrid is None:
        return record
    if not rows:  # no positive in the index: not found (+inf), as for the dense kinds
        return record.model_copy(update={"hybrid_top1": float(hybrid.max())})
    best = max(rows, key=lambda r: (hybrid[r], -r))
    return record.model_copy(
        update={
            "hybrid_row": best,
            "hybrid": float(hybrid[best]),
            "hybrid_top1": float(hybrid.max()),
            "hybrid_rank": int(ranks_of(hybrid)[best]),
        }
    )


def walk_record(
    qid: str,
    question: str,
    answer: str,
    origin: str,
    sims: np.ndarray,
    positive_rows: set[int],
    *,
    depth: int,
    source_row: int | None = None,
    judge: Callable[[int], bool] | None = None,
    hybrid: np.ndarray | None = None,
) -> CalibrationRecord:
    """Walk the chunks by similarity (at most `depth`) to the first known positive or the first `judge` accepts."""
    order = np.argsort(-sims, kind="stable")
    found_row, calls = None, 0
    for _position, row in enumerate(order[:depth]):
        row = int(row)
        if row in positive_rows:
            found_row = row
            break
        if judge is not None:
            calls += 1
            if judge(row):
                found_row = row
                break
    rank = None if found_row is None else int(np.flatnonzero(order == found_row)[0]) + 1
    record = CalibrationRecord(
        qid=qid,
        question=question,
        answer=answer,
        origin=origin,
        source_row=source_row,
        found=found_row is not None,
        positive_row=found_row,
        similarity=None if found_row is None else float(sims[found_row]),
        top1=float(sims[order[0]]),
        rank=rank,
        judge_calls=calls,
    )
    known: set[int | None] = {*positive_rows, found_row}
    return add_hybrid(record, hybrid, known)
