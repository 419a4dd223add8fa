"""The abstention part of `calibration.json`: answerability scores and their measured error rates.

Answerable scores are the calibration questions' top-1 cosines (their answer is in the
index). Unanswerable scores come from labelled unanswerable questions when given
(`ragsieve calibrate --unanswerable FILE`, e.g. SQuAD 2.0's `is_impossible` questions),
else from the label-free proxy: each calibration question asked with its own source
document held out of the index (`top1_excluding`). A proxy question another document
also answers still counts as unanswerable, which raises the cutoff: fewer abstentions are
overruled (the safe side). The proxy does not model adversarial unanswerable questions
written against a passage that *is* in the index (SQuAD 2.0's): use labelled ones for those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel

from ragsieve.tools.filters.abstention import abstention_rates, answerable_threshold

SIGNAL = "dense-top1"  # the question's best cosine over the whole index


class AbstentionCalibration(BaseModel):
    signal: str = SIGNAL
    origin: str  # labelled | heldout-document
    answerable: list[float]  # calibration half
    unanswerable: list[float]  # calibration half: the cutoff comes from these
    heldout_answerable: list[float]
    heldout_unanswerable: list[float]

    def threshold(self, max_false_answer: float) -> float:
        return answerable_threshold(self.unanswerable, max_false_answer)

    def report(self, max_false_answer: float) -> dict:
        t = self.threshold(max_false_answer)
        return {
            "signal": self.signal,
            "origin": self.origin,
            "max_false_answer": max_false_answer,
            "threshold": None if math.isinf(t) else round(t, 6),
            "n_calibration_unanswerable": len(self.unanswerable),
            **abstention_rates(self.heldout_answerable, self.heldout_unanswerable, t),
        }


def build_abstention(
    answerable: list[tuple[float, bool]], unanswerable: list[tuple[float, bool]], origin: str
) -> AbstentionCalibration | None:
    """From (score, is_heldout) pairs; None when there is no unanswerable score at all."""
    if not unanswerable:
        return None

    def half(items: Iterable[tuple[float | None, bool]], held: bool) -> list[float]:
        return [round(float(s), 6) for s, h in items if h == held and s is not None]

    return AbstentionCalibration(
        origin=origin,
        answerable=half(answerable, False),
        unanswerable=half(unanswerable, False),
        heldout_answerable=half(answerable, True),
        heldout_unanswerable=half(unanswerable, True),
    )
