"""Split conformal retrieval: how many chunks to keep so the answer is in them with probability 1-alpha.

References
- V. Vovk, A. Gammerman, G. Shafer, "Algorithmic Learning in a Random World" (2005):
  split (inductive) conformal prediction.
- A. N. Angelopoulos, S. Bates, "A Gentle Introduction to Conformal Prediction and
  Distribution-Free Uncertainty Quantification" (2021), sec. 1: with n exchangeable
  calibration scores s_1..s_n, the threshold q = the ceil((n+1)(1-alpha))-th smallest
  score gives P(s_test <= q) >= 1-alpha, and < 1-alpha + 1/(n+1) without ties.
- CONFLARE (Rouzrokh et al., Mayo Clinic, 2024): conformal retrieval for RAG with the
  raw similarity of the first chunk that contains the answer as the score. Its code
  takes a plain percentile (no finite-sample correction); we use the corrected rank.

A calibration question contributes the nonconformity of its *positive*: the first chunk,
in order of similarity, that contains the answer. Every score kind below is monotone
decreasing in the chunk's similarity for a fixed query, so the kept set of a query is a
prefix of its similarity ranking and "covered" means "positive's score <= q".
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from ragsieve.tools.errors import UsageError

RATIO_EPS = 1e-6


class ScoreKind(str, Enum):
    """Nonconformity of a chunk with similarity s, query top-1 similarity t and rank r (1-based)."""

    RAW = "raw"      # 1 - s                (CONFLARE: one global similarity threshold)
    GAP = "gap"      # t - s                (distance below the query's best chunk)
    RATIO = "ratio"  # 1 - s / max(t, eps)  (relative shortfall from the best chunk)
    RANK = "rank"    # r                    (conformal top-k)


def check_alpha(alpha: float) -> float:
    if not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise UsageError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def conformal_rank(n: int, alpha: float) -> int:
    """k = ceil((n+1)(1-alpha)): which order statistic is the threshold (may exceed n)."""
    check_alpha(alpha)
    if n < 0:
        raise UsageError(f"n must be >= 0, got {n}")
    # the small epsilon keeps e.g. (9+1)*(1-0.1) = 9.000000000000002 from becoming 10
    return int(math.ceil((n + 1) * (1.0 - alpha) - 1e-9))


def conformal_quantile(scores: Sequence[float], alpha: float) -> float:
    """The ceil((n+1)(1-alpha))-th smallest of `scores` (Angelopoulos & Bates eq. 1).

    Returns +inf when that rank exceeds n (too few calibration points for this alpha:
    only the whole candidate set carries the guarantee). +inf scores (questions whose
    answer was not found within the search depth) are kept: they make q larger, which
    keeps the guarantee valid instead of biasing the calibration set.
    """
    arr = np.sort(np.asarray(scores, dtype=float))
    if arr.ndim != 1 or np.isnan(arr).any():
        raise UsageError("conformal scores must be a flat list of numbers without NaN")
    k = conformal_rank(arr.size, alpha)
    if k > arr.size:
        return math.inf
    return float(arr[max(k, 1) - 1])


def nonconformity(kind: ScoreKind, similarity, top1, rank) -> np.ndarray:
    """Score of chunks given their similarity, the query's top-1 similarity and their 1-based rank."""
    s = np.asarray(similarity, dtype=float)
    t = np.asarray(top1, dtype=float)
    r = np.asarray(rank, dtype=float)
    return _SCORES[kind](s, t, r)


_SCORES = {
    ScoreKind.RAW: lambda s, t, r: 1.0 - s,
    ScoreKind.GAP: lambda s, t, r: t - s,
    ScoreKind.RATIO: lambda s, t, r: 1.0 - s / np.maximum(t, RATIO_EPS),
    ScoreKind.RANK: lambda s, t, r: r,
}


def ranks_of(similarities) -> np.ndarray:
    """1-based rank of each similarity, best first (ties: earlier position ranks first)."""
    sims = np.asarray(similarities, dtype=float)
    order = np.argsort(-sims, kind="stable")
    ranks = np.empty(sims.size, dtype=float)
    ranks[order] = np.arange(1, sims.size + 1)
    return ranks


def candidate_scores(kind: ScoreKind, similarities) -> np.ndarray:
    """Nonconformity of every candidate of one query, the candidates being all it could keep."""
    sims = np.asarray(similarities, dtype=float)
    if sims.size == 0:
        return sims
    return nonconformity(kind, sims, sims.max(), ranks_of(sims))


def keep_mask(kind: ScoreKind, similarities, qhat: float) -> np.ndarray:
    """The conformal set at inference: every candidate whose score is <= q (not a fixed k)."""
    return candidate_scores(kind, similarities) <= qhat


def empirical_coverage(scores: Sequence[float], qhat: float) -> float:
    """Fraction of held-out positives whose score is <= q."""
    arr = np.asarray(scores, dtype=float)
    return float(np.mean(arr <= qhat)) if arr.size else math.nan


def binomial_tolerance(p: float, m: int, z: float = 2.0) -> float:
    """z standard errors of a proportion p measured on m draws."""
    return z * math.sqrt(p * (1.0 - p) / m) if m > 0 else math.inf


def smallest_k_for_coverage(positive_ranks: Sequence[float], coverage: float) -> float:
    """Fixed top-k baseline: the smallest k with mean(rank <= k) >= coverage (inf if unreachable)."""
    ranks = np.sort(np.asarray(positive_ranks, dtype=float))
    if ranks.size == 0:
        return math.nan
    need = int(math.ceil(coverage * ranks.size - 1e-9))
    if need <= 0:
        return 0.0
    return float(ranks[need - 1])


@dataclass
class KindReport:
    kind: ScoreKind
    qhat: float
    coverage: float
    mean_set_size: float
    median_set_size: float

    def as_dict(self) -> dict:
        return {"kind": self.kind.value, "qhat": _num(self.qhat), "coverage": round(self.coverage, 4),
                "mean_set_size": round(self.mean_set_size, 3), "median_set_size": self.median_set_size}


@dataclass
class CalibrationReport:
    alpha: float
    n_calibration: int
    n_heldout: int
    tolerance: float
    kinds: list[KindReport]
    chosen: ScoreKind
    fixed_k: float
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"alpha": self.alpha, "target_coverage": round(1 - self.alpha, 4), "n_calibration": self.n_calibration,
                "n_heldout": self.n_heldout, "tolerance": round(self.tolerance, 4), "chosen": self.chosen.value,
                "kinds": [k.as_dict() for k in self.kinds], "fixed_top_k_at_equal_coverage": _num(self.fixed_k),
                "notes": list(self.notes)}


def _num(x: float):
    return None if x is None or math.isinf(x) or math.isnan(x) else round(float(x), 6)


def positive_scores(kind: ScoreKind, similarity, top1, rank, found) -> np.ndarray:
    """Scores of the positives; a question whose answer was not found gets +inf."""
    scores = nonconformity(kind, similarity, top1, rank)
    return np.where(np.asarray(found, dtype=bool), scores, math.inf)


def evaluate_kinds(cal: dict, held: dict, held_similarities: Sequence[np.ndarray], alpha: float,
                   kinds: Sequence[ScoreKind] = tuple(ScoreKind)) -> list[KindReport]:
    """Per score kind: q from the calibration split, coverage and set size on the held-out split.

    `cal` / `held` hold equal-length arrays "similarity", "top1", "rank", "found" of the
    positives; `held_similarities[j]` are all candidate similarities of held-out query j.
    """
    reports = []
    for kind in kinds:
        qhat = conformal_quantile(positive_scores(kind, **cal), alpha)
        cov = empirical_coverage(positive_scores(kind, **held), qhat)
        sizes = [int(keep_mask(kind, sims, qhat).sum()) for sims in held_similarities]
        reports.append(KindReport(kind, qhat, cov, float(np.mean(sizes)) if sizes else math.nan,
                                  float(np.median(sizes)) if sizes else math.nan))
    return reports


def choose_kind(reports: Sequence[KindReport], alpha: float, n_heldout: int, z: float = 2.0) -> tuple[ScoreKind, list[str]]:
    """The kind keeping the fewest chunks among those at coverage on the held-out split.

    "At coverage" means held-out coverage >= (1-alpha) - z*sqrt(alpha(1-alpha)/m): the
    finite-sample guarantee is marginal, so an exact ">= 1-alpha" would reject correct
    thresholds half the time by chance. If no kind qualifies, the best-covering one wins.
    """
    notes: list[str] = []
    floor = (1 - alpha) - binomial_tolerance(1 - alpha, n_heldout, z)
    ok = [r for r in reports if r.coverage >= floor]
    if not ok:
        best = max(reports, key=lambda r: (r.coverage, -r.mean_set_size))
        notes.append(f"no score kind reached coverage {floor:.3f} on held-out data; chose the best covering "
                     f"({best.kind.value}, {best.coverage:.3f})")
        return best.kind, notes
    return min(ok, key=lambda r: (r.mean_set_size, list(ScoreKind).index(r.kind))).kind, notes
