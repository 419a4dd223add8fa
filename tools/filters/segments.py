"""Relevant segment extraction (RSE), after dsRAG (D-Star-AI/dsRAG, `rse.py`).

Chunks of a document are scored; the best *segments* (runs of consecutive chunks,
irrelevant chunks sandwiched between relevant ones included) are returned instead of
isolated chunks.

Chunk value (dsRAG `get_chunk_value`):

    value = exp(-rank / decay_rate) * relevance - irrelevant_chunk_penalty

with `rank` 0-based among the retrieved chunks and `relevance` an *absolute* relevance
in [0, 1]; a chunk that was not retrieved has value -penalty. RRF/hybrid scores are
ranks, not absolute relevance, so callers map a calibrated similarity to [0, 1] first:
`relevance_from_calibration` (empirical CDF of the similarities of known positives,
i.e. the conformal p-value of the raw score) or, without calibration,
`relevance_from_cosine` (a fixed linear window on the cosine, then dsRAG's Beta(0.4, 0.4)
CDF that spreads values over 0-1).

Segment choice (dsRAG `get_best_segments`): the constrained maximum-sum subarray, taken
repeatedly — each round the best segment of at most `max_length` chunks that overlaps no
earlier one, crosses no document boundary and fits in `overall_max_length`; stop when
the best is worth less than `minimum_value`. Greedy on purpose: the best single
segment is kept whole (sandwiched chunks included) rather than split into pieces that
sum a little higher.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt

from ragsieve.tools.errors import UsageError
from ragsieve.tools.modes import parse_enum

BETA_A = BETA_B = 0.4


class RSEPreset(str, Enum):
    DEFAULT = "default"
    BALANCED = "balanced"
    PRECISION = "precision"
    FIND_ALL = "find_all"


@dataclass(frozen=True)
class RSEParams:
    max_length: int
    overall_max_length: int
    minimum_value: float
    irrelevant_chunk_penalty: float
    decay_rate: float

    def __post_init__(self) -> None:
        if self.max_length < 1 or self.overall_max_length < 1:
            raise UsageError(
                f"RSE lengths must be >= 1, got max_length={self.max_length}, overall_max_length={self.overall_max_length}"
            )
        if self.decay_rate <= 0:
            raise UsageError(f"RSE decay_rate must be > 0, got {self.decay_rate}")
        if self.irrelevant_chunk_penalty < 0:
            raise UsageError(f"RSE irrelevant_chunk_penalty must be >= 0, got {self.irrelevant_chunk_penalty}")


PRESETS: dict[RSEPreset, RSEParams] = {
    # dsRAG's defaults when a query gives no rse_params (max_length 20, overall 30, minimum 0.7, penalty 0.2, decay 30)
    RSEPreset.DEFAULT: RSEParams(20, 30, 0.7, 0.2, 30),
    # dsRAG's RSE_PARAMS_PRESETS (rse.py)
    RSEPreset.BALANCED: RSEParams(15, 30, 0.5, 0.18, 30),
    RSEPreset.PRECISION: RSEParams(15, 30, 0.7, 0.2, 30),
    RSEPreset.FIND_ALL: RSEParams(40, 200, 0.4, 0.18, 200),
}
REFERENCE_CHUNK_CHARS = 700  # dsRAG: the average chunk length at its default chunk size


def preset_params(preset: "RSEPreset | str", **overrides: float | None) -> RSEParams:
    """A preset's parameters with the given (non-None) fields replaced."""
    base = PRESETS[parse_enum(RSEPreset, preset, "RSE preset")]
    changes = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(changes) - set(RSEParams.__dataclass_fields__)
    if unknown:
        raise UsageError(f"unknown RSE parameters {sorted(unknown)}: valid are {sorted(RSEParams.__dataclass_fields__)}")
    return RSEParams(**{**base.__dict__, **changes})


def beta_transform(x: npt.ArrayLike) -> np.ndarray:
    """dsRAG's `transform`: the Beta(0.4, 0.4) CDF, spreading [0, 1] values towards its ends."""
    from scipy.stats import beta

    return beta.cdf(np.clip(np.asarray(x, dtype=float), 0.0, 1.0), BETA_A, BETA_B)


def relevance_from_cosine(cosine: npt.ArrayLike, low: float = 0.1, high: float = 0.7) -> np.ndarray:
    """Absolute relevance without calibration: clip((cos - low) / (high - low)), then the Beta CDF."""
    if not high > low:
        raise UsageError(f"cosine window needs high > low, got low={low}, high={high}")
    return beta_transform((np.asarray(cosine, dtype=float) - low) / (high - low))


def relevance_from_calibration(similarity: npt.ArrayLike, positive_similarities: Sequence[float]) -> np.ndarray:
    """Calibrated relevance: the share of known positives (calibration questions) whose
    similarity is <= this one — the conformal p-value of the raw-similarity score."""
    pos = np.sort(np.asarray([p for p in positive_similarities if math.isfinite(p)], dtype=float))
    if pos.size == 0:
        raise UsageError("calibrated relevance needs at least one positive similarity")
    sims = np.asarray(similarity, dtype=float)
    return np.searchsorted(pos, sims, side="right") / float(pos.size)


def chunk_values(relevance: npt.ArrayLike, ranks: npt.ArrayLike, params: RSEParams) -> np.ndarray:
    """value = exp(-rank / decay_rate) * relevance - penalty (rank 0-based)."""
    rel = np.asarray(relevance, dtype=float)
    rank = np.asarray(ranks, dtype=float)
    return np.exp(-rank / params.decay_rate) * rel - params.irrelevant_chunk_penalty


def adjust_for_chunk_length(
    values: npt.ArrayLike, chunk_chars: npt.ArrayLike, reference: int = REFERENCE_CHUNK_CHARS
) -> np.ndarray:
    """dsRAG's chunk-length adjustment: value * max(chars, reference) / reference, so a long
    chunk counts for the several standard chunks it spans (shorter ones are not scaled down)."""
    v = np.asarray(values, dtype=float)
    chars = np.maximum(np.asarray(chunk_chars, dtype=float), float(reference))
    return v * (chars / float(reference))


@dataclass(frozen=True)
class Segment:
    start: int  # inclusive, position in the value array
    end: int  # exclusive
    value: float


def best_segments(
    values: Sequence[float], max_length: int, overall_max_length: int, minimum_value: float, splits: Sequence[int] = ()
) -> list[Segment]:
    """dsRAG's segment search: repeatedly take the maximum-sum subarray that fits, in position order.

    Each round picks the highest-value segment of at most `max_length` chunks that overlaps
    no chosen segment, crosses no split and keeps the chosen total within
    `overall_max_length`; the search stops when the best remaining segment is worth less
    than `minimum_value`. `splits` are positions p where a segment may not continue from
    p-1 to p (document boundaries in a concatenated array). Ties prefer the earlier, then
    the shorter segment.
    """
    v = np.asarray(values, dtype=float)
    n = v.size
    if max_length < 1 or overall_max_length < 1:
        raise UsageError(f"max_length and overall_max_length must be >= 1, got {max_length}, {overall_max_length}")
    prefix = np.concatenate([[0.0], np.cumsum(v)])
    blocked = np.zeros(n + 1, dtype=bool)  # blocked[p]: a segment may not contain both p-1 and p
    for p in splits:
        if 0 < p < n:
            blocked[p] = True
    used = np.zeros(n, dtype=bool)
    chosen: list[Segment] = []
    total = 0
    while total < overall_max_length:
        best: tuple[float, int, int] | None = None
        room = min(max_length, overall_max_length - total)
        for start in range(n):
            if used[start]:
                continue
            for end in range(start + 1, min(n, start + room) + 1):
                if used[end - 1] or (end - 1 > start and blocked[end - 1]):
                    break
                value = prefix[end] - prefix[start]
                if best is None or value > best[0] + 1e-12:
                    best = (value, start, end)
        if best is None or best[0] < minimum_value:
            break
        value, start, end = best
        used[start:end] = True
        total += end - start
        chosen.append(Segment(start, end, float(value)))
    return sorted(chosen, key=lambda seg: seg.start)
