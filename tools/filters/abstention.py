"""Calibrated abstention: whether a question is answerable from the index, as a measured decision.

The signal is the question's *answerability score* - its top-1 dense cosine over the whole
index (the closest chunk). A model that says "the context does not contain the answer" is
overruled only when this score exceeds a threshold calibrated on questions known (or
constructed) to be unanswerable, so that a new unanswerable question exceeds it with
probability at most `max_false_answer` (split conformal, Angelopoulos & Bates 2021, eq. 1,
applied to the unanswerable questions' scores: the ceil((n+1)(1-eps))-th smallest).

A non-empty conformal set says nothing here: CONFLARE calibrates on answerable questions
only, so its cutoff admits chunks for every question. This score is ours (no paper gives
an abstention rule for this pipeline); its error rates are measured on held-out questions
(`abstention_rates`) and stored with the calibration.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ragsieve.tools.filters.conformal import conformal_quantile


def answerable_threshold(unanswerable_scores: Sequence[float], max_false_answer: float) -> float:
    """The cutoff t with P(score > t) <= `max_false_answer` for a new unanswerable question
    (exchangeable with the calibration ones); +inf when too few scores for that rate."""
    if not 0.0 < max_false_answer < 1.0:
        raise ValueError(f"max_false_answer must be in (0, 1), got {max_false_answer}")
    scores = [float(s) for s in unanswerable_scores if s is not None and not math.isnan(float(s))]
    if not scores:
        return math.inf
    return conformal_quantile(scores, max_false_answer)


def says_answerable(score: float | None, threshold: float) -> bool:
    """The calibrated evidence says the question is answerable (strictly above the cutoff)."""
    return score is not None and not math.isinf(threshold) and float(score) > threshold


def abstention_rates(
    answerable_scores: Sequence[float], unanswerable_scores: Sequence[float], threshold: float
) -> dict[str, float | int | None]:
    """Held-out error rates of the rule "overrule an abstention when score > threshold":
    `false_answerable` (unanswerable questions it would overrule: its error) and
    `answerable_detected` (answerable questions it would overrule: its power)."""
    ans = np.asarray([s for s in answerable_scores if s is not None], dtype=float)
    una = np.asarray([s for s in unanswerable_scores if s is not None], dtype=float)
    return {
        "n_answerable": int(ans.size),
        "n_unanswerable": int(una.size),
        "false_answerable": float(np.mean(una > threshold)) if una.size else None,
        "answerable_detected": float(np.mean(ans > threshold)) if ans.size else None,
    }


def top1_excluding(similarities: np.ndarray, excluded_rows: Sequence[int]) -> float | None:
    """The best similarity among rows not in `excluded_rows` (a question asked with its own
    document held out of the index: the label-free unanswerable proxy); None if none is left."""
    sims = np.asarray(similarities, dtype=float)
    if not len(excluded_rows):
        return float(sims.max()) if sims.size else None
    mask = np.ones(sims.size, dtype=bool)
    mask[np.asarray(list(excluded_rows), dtype=int)] = False
    return float(sims[mask].max()) if mask.any() else None
