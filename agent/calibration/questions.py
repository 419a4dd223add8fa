"""Calibration questions: what the LLM writes and judges, qrels read from BEIR files, and how many are enough."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, Field

from ragsieve.tools.datasets.beir import read_qrels as beir_qrels
from ragsieve.tools.datasets.beir import read_queries


class GeneratedQA(BaseModel):
    question: str = Field(min_length=3)
    answer: str = Field(min_length=1)


class ContainsVerdict(BaseModel):
    contains: bool


def read_qrels(queries_path: str | Path, qrels_path: str | Path) -> list[tuple[str, str, list[str]]]:
    """(query id, text, positive doc ids) from BEIR queries.jsonl and a qrels tsv (`ragsieve.tools.datasets.beir`)."""
    texts = read_queries(queries_path)
    positives = {qid: [doc for doc, grade in docs.items() if grade > 0] for qid, docs in beir_qrels(qrels_path).items()}
    return [(qid, texts[qid], docs) for qid, docs in positives.items() if docs and qid in texts]


def needed_calibration_questions(alpha: float) -> int:
    """The fewest calibration questions with a finite conformal threshold at `alpha`:
    the quantile level ceil((n + 1)(1 - alpha)) / n is <= 1 only when n >= 1/alpha - 1."""
    return max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))


def calibration_warnings(n_calibration: int, alpha: float, chosen_qhat: float) -> list[str]:
    """Warnings `ragsieve calibrate` prints: too few questions for alpha, an infinite threshold."""
    warnings = []
    need = needed_calibration_questions(alpha)
    if n_calibration < need:
        warnings.append(
            f"WARNING: {n_calibration} calibration questions are too few for alpha={alpha}: at least "
            f"{need} are needed (ceil(1/alpha) - 1), and about twice that with the held-out half; "
            f"the threshold keeps every chunk"
        )
    if math.isinf(chosen_qhat):
        warnings.append(
            "WARNING: the calibrated threshold is +inf (keep every chunk): the conformal step will not "
            "narrow the context; calibrate with more questions or a larger alpha"
        )
    return warnings
