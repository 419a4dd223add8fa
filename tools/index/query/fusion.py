"""Rank fusion: pure functions that merge ranked lists from several retrievers.

Items are any hashable ids (the retriever uses index rows). Every function is
deterministic: ties are broken by first appearance across the input lists.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from ragsieve.tools.errors import UsageError
from ragsieve.tools.modes import FusionMode


def _check_weights(n_lists: int, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * n_lists
    w = [float(x) for x in weights]
    if len(w) != n_lists:
        raise UsageError(f"fusion: {len(w)} weights for {n_lists} lists")
    if any(x < 0 for x in w):
        raise UsageError(f"fusion weights must be >= 0, got {w}")
    if not any(x > 0 for x in w):
        raise UsageError(f"fusion needs at least one positive weight, got {w}")
    return w


K = TypeVar("K", bound=Hashable)  # a ranked item: a row number, a document id


def _ordered(scores: dict[K, float], first_seen: dict[K, int]) -> list[tuple[K, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def rrf(ranked_lists: Sequence[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Reciprocal Rank Fusion, best first.

    score(d) = sum_i w_i / (k + rank_i(d)), rank 1-based, summed over the lists
    that contain d (Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion
    outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009;
    k = 60 as in the paper). `weights` (default all 1) multiply each list's
    term; a list with weight 0 contributes nothing.
    """
    if k < 1:
        raise UsageError(f"rrf k must be >= 1, got {k}")
    w = _check_weights(len(ranked_lists), weights)
    scores: dict[K, float] = {}
    first_seen: dict[K, int] = {}
    pos = 0
    for weight, ranked in zip(w, ranked_lists):
        for rank, item in enumerate(ranked, start=1):
            if item not in first_seen:
                first_seen[item] = pos
                pos += 1
            if weight > 0:
                scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            else:
                scores.setdefault(item, 0.0)
    return _ordered(scores, first_seen)


def minmax_normalise(scores: Sequence[float]) -> list[float]:
    """Min-max scaling to [0, 1]: (s - min) / (max - min).

    The score normalisation of Lee, "Analyses of multiple evidence combination"
    (SIGIR 1997), as used for CombSUM-style fusion (Fox & Shaw 1994). When all
    scores are equal (max == min) every score maps to 1.0 (each item is as good
    as the best one of its list); an empty list stays empty.
    """
    values = [float(s) for s in scores]
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def weighted_fusion(score_lists: Sequence[Mapping[K, float]], weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Weighted sum of min-max normalised scores (CombSUM with weights), best first.

    score(d) = sum_i w_i * minmax_i(s_i(d)) / sum_i w_i, where an item missing
    from list i gets 0 for it (Fox & Shaw, "Combination of multiple searches",
    TREC-2 1994; normalisation as in Lee 1997). Dividing by the weight total
    keeps the fused score in [0, 1]; it does not change the order.
    """
    w = _check_weights(len(score_lists), weights)
    total = sum(w)
    fused: dict[K, float] = {}
    first_seen: dict[K, int] = {}
    pos = 0
    for weight, scores in zip(w, score_lists):
        items = list(scores.keys())
        normed = minmax_normalise([scores[i] for i in items])
        for item, value in zip(items, normed):
            if item not in first_seen:
                first_seen[item] = pos
                pos += 1
            fused[item] = fused.get(item, 0.0) + weight * value / total
    return _ordered(fused, first_seen)


Ranked = list[tuple[int, float]]  # (row, score) best first: one retriever's candidates


def _fuse_rrf(lists: Sequence[Ranked], weights: Sequence[float], k: int) -> list[tuple[int, float]]:
    return rrf([[r for r, _ in lst] for lst in lists], k=k, weights=weights)


def _fuse_weighted(lists: Sequence[Ranked], weights: Sequence[float], k: int) -> list[tuple[int, float]]:
    return weighted_fusion([dict(lst) for lst in lists], weights=weights)


_FUSERS: dict[FusionMode, Callable[[Sequence[Ranked], Sequence[float], int], list[tuple[int, float]]]] = {
    FusionMode.RRF: _fuse_rrf,
    FusionMode.WEIGHTED: _fuse_weighted,
}


def fuse(mode: FusionMode, lists: Sequence[Ranked], weights: Sequence[float], k: int) -> list[tuple[int, float]]:
    """The (row, score) lists fused by `mode` (`k`: the RRF constant, unused by weighted fusion)."""
    return _FUSERS[mode](lists, weights, k)


def check_weights(bm25_weight: float, dense_weight: float) -> tuple[float, float]:
    """The (bm25, dense) retriever weights as floats; refused unless both are >= 0 and one is > 0."""
    for name, w in (("bm25_weight", bm25_weight), ("dense_weight", dense_weight)):
        if not (isinstance(w, (int, float)) and w >= 0):
            raise UsageError(f"{name} must be a number >= 0, got {w!r}")
    if bm25_weight == 0 and dense_weight == 0:
        raise UsageError("bm25_weight and dense_weight are both 0: at least one retriever must be on")
    return float(bm25_weight), float(dense_weight)
