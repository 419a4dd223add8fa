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

- G. V. Cormack, C. L. A. Clarke, S. Buettcher, "Reciprocal Rank Fusion outperforms
  Condorcet and individual Rank Learning Methods" (SIGIR 2009): the hybrid signal.

A calibration question contributes the nonconformity of its *positive*: the first chunk,
in order of the kind's signal, that contains the answer. Every score kind below is monotone
decreasing in its signal for a fixed query, so the kept set of a query is a prefix of its
ranking by that signal and "covered" means "positive's score <= q".

Signals: the dense cosine similarity (raw, gap, ratio, rank; CONFLARE's family), or the
*hybrid* signal (hybrid-rank, hybrid-ratio): the reciprocal-rank fusion of the chunk's dense
rank and BM25 rank over the whole corpus, the same fusion first-stage retrieval uses. The
hybrid ranking places answers higher than the dense one (on HotpotQA's second hops and
SciFact's claims especially), so at equal coverage its conformal set is smaller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import numpy.typing as npt

from ragsieve.tools.errors import UsageError

RATIO_EPS = 1e-6


class ScoreKind(str, Enum):
    """Nonconformity of a chunk with similarity s, query top-1 similarity t and rank r (1-based)."""

    RAW = "raw"  # 1 - s                (CONFLARE: one global similarity threshold)
    GAP = "gap"  # t - s                (distance below the query's best chunk)
    RATIO = "ratio"  # 1 - s / max(t, eps)  (relative shortfall from the best chunk)
    RANK = "rank"  # r                    (conformal top-k)
    HYBRID_RANK = "hybrid-rank"  # rank by the hybrid signal h (conformal top-k of hybrid retrieval)
    HYBRID_RATIO = "hybrid-ratio"  # 1 - h / max(h_top1, eps)

    @property
    def hybrid(self) -> bool:
        """True when the kind scores the hybrid (RRF) signal rather than the dense similarity."""
        return self in (ScoreKind.HYBRID_RANK, ScoreKind.HYBRID_RATIO)

    @property
    def formula(self) -> "ScoreKind":
        """The dense kind whose formula this kind applies to its own signal."""
        return {ScoreKind.HYBRID_RANK: ScoreKind.RANK, ScoreKind.HYBRID_RATIO: ScoreKind.RATIO}.get(self, self)


DENSE_KINDS = tuple(k for k in ScoreKind if not k.hybrid)
HYBRID_RRF_K = 60  # as the retriever's default `rrf_k` (Cormack et al.)


def hybrid_signal(dense: npt.ArrayLike, bm25: npt.ArrayLike, k: int = HYBRID_RRF_K) -> np.ndarray:
    """RRF score of every chunk of one query: 1/(k + dense rank) + 1/(k + BM25 rank).

    The array form of `ragsieve.tools.index.query.fusion.rrf` for whole-corpus score vectors (that
    one fuses ranked id lists through dicts, too slow for every row of a large index).

    Ranks are 1-based over all the given chunks (ties: earlier position first); a chunk
    with BM25 score <= 0 matches no query term and gets no BM25 term, as in retrieval,
    where it is absent from the BM25 list.
    """
    d = np.asarray(dense, dtype=float)
    b = np.asarray(bm25, dtype=float)
    if d.shape != b.shape or d.ndim != 1:
        raise UsageError(f"hybrid signal needs two equal-length score vectors, got {d.shape} and {b.shape}")
    if k < 1:
        raise UsageError(f"rrf k must be >= 1, got {k}")
    out = 1.0 / (k + ranks_of(d))
    return out + np.where(b > 0, 1.0 / (k + ranks_of(b)), 0.0)


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


def conformal_quantile(scores: Sequence[float] | np.ndarray, alpha: float) -> float:
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


def nonconformity(kind: ScoreKind, similarity: npt.ArrayLike, top1: npt.ArrayLike, rank: npt.ArrayLike) -> np.ndarray:
    """Score of chunks given their signal value (dense similarity, or the hybrid signal for the
    hybrid kinds), the query's top-1 value of that signal and their 1-based rank by it."""
    s = np.asarray(similarity, dtype=float)
    t = np.asarray(top1, dtype=float)
    r = np.asarray(rank, dtype=float)
    return _SCORES[kind.formula](s, t, r)


_SCORES = {
    ScoreKind.RAW: lambda s, t, r: 1.0 - s,
    ScoreKind.GAP: lambda s, t, r: t - s,
    ScoreKind.RATIO: lambda s, t, r: 1.0 - s / np.maximum(t, RATIO_EPS),
    ScoreKind.RANK: lambda s, t, r: r,
}


def ranks_of(similarities: npt.ArrayLike) -> np.ndarray:
    """1-based rank of each similarity, best first (ties: earlier position ranks first)."""
    sims = np.asarray(similarities, dtype=float)
    order = np.argsort(-sims, kind="stable")
    ranks = np.empty(sims.size, dtype=float)
    ranks[order] = np.arange(1, sims.size + 1)
    return ranks


def candidate_scores(kind: ScoreKind, similarities: npt.ArrayLike) -> np.ndarray:
    """Nonconformity of every candidate of one query, the candidates being all it could keep
    (`similarities`: the values of the kind's signal)."""
    sims = np.asarray(similarities, dtype=float)
    if sims.size == 0:
        return sims
    return nonconformity(kind, sims, sims.max(), ranks_of(sims))


def keep_mask(kind: ScoreKind, similarities: npt.ArrayLike, qhat: float) -> np.ndarray:
    """The conformal set at inference: every candidate whose score is <= q (not a fixed k)."""
    return candidate_scores(kind, similarities) <= qhat


def empirical_coverage(scores: Sequence[float] | np.ndarray, qhat: float) -> float:
    """Fraction of held-out positives whose score is <= q."""
    arr = np.asarray(scores, dtype=float)
    return float(np.mean(arr <= qhat)) if arr.size else math.nan


def binomial_tolerance(p: float, m: int, z: float = 2.0) -> float:
    """z standard errors of a proportion p measured on m draws."""
    return z * math.sqrt(p * (1.0 - p) / m) if m > 0 else math.inf


def smallest_k_for_coverage(positive_ranks: Sequence[float] | np.ndarray, coverage: float) -> float:
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
        return {
            "kind": self.kind.value,
            "qhat": _num(self.qhat),
            "coverage": round(self.coverage, 4),
            "mean_set_size": round(self.mean_set_size, 3),
            "median_set_size": self.median_set_size,
        }


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
        return {
            "alpha": self.alpha,
            "target_coverage": round(1 - self.alpha, 4),
            "n_calibration": self.n_calibration,
            "n_heldout": self.n_heldout,
            "tolerance": round(self.tolerance, 4),
            "chosen": self.chosen.value,
            "kinds": [k.as_dict() for k in self.kinds],
            "fixed_top_k_at_equal_coverage": _num(self.fixed_k),
            "notes": list(self.notes),
        }


def _num(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) or math.isnan(x) else round(float(x), 6)


def positive_scores(
    kind: ScoreKind,
    similarity: npt.ArrayLike,
    top1: npt.ArrayLike,
    rank: npt.ArrayLike,
    found: npt.ArrayLike,
    hybrid: npt.ArrayLike | None = None,
    hybrid_top1: npt.ArrayLike | None = None,
    hybrid_rank: npt.ArrayLike | None = None,
    hybrid_found: npt.ArrayLike | None = None,
) -> np.ndarray:
    """Scores of the positives; a question whose answer was not found gets +inf.

    The hybrid kinds read the positive's hybrid signal, its query's top-1 and its hybrid
    rank (`hybrid*`); calibrations made without them cannot score those kinds.
    """
    if kind.hybrid:
        if (
            hybrid is None
            or hybrid_top1 is None
            or hybrid_rank is None
            or hybrid_found is None
            or np.isnan(np.asarray(hybrid_top1, dtype=float)).any()
        ):
            raise UsageError(
                f"score kind {kind.value!r} needs a calibration with hybrid scores "
                f"(made by this version of `ragsieve calibrate` on an index with BM25): calibrate again"
            )
        similarity, top1, rank, found = hybrid, hybrid_top1, hybrid_rank, hybrid_found
    scores = nonconformity(kind, np.nan_to_num(np.asarray(similarity, dtype=float)), top1, rank)
    return np.where(np.asarray(found, dtype=bool), scores, math.inf)


def has_hybrid(arrays: dict) -> bool:
    """True when record arrays carry the hybrid signal of every positive (the hybrid kinds apply)."""
    top1 = arrays.get("hybrid_top1")
    return top1 is not None and len(top1) > 0 and not np.isnan(np.asarray(top1, dtype=float)).any()


def evaluate_kinds(
    cal: dict, held: dict, held_similarities: Sequence, alpha: float, kinds: Sequence[ScoreKind] | None = None
) -> list[KindReport]:
    """Per score kind: q from the calibration split, coverage and set size on the held-out split.

    `cal` / `held` hold equal-length arrays "similarity", "top1", "rank", "found" of the
    positives (and "hybrid", "hybrid_top1", "hybrid_rank", "hybrid_found" for the hybrid
    kinds); `held_similarities[j]` are all candidate similarities of held-out query j, or a
    dict {"dense": ..., "hybrid": ...} of both signals. Default kinds: the dense ones, and
    the hybrid ones when both splits carry the hybrid signal.
    """
    if kinds is None:
        kinds = tuple(ScoreKind) if has_hybrid(cal) and has_hybrid(held) else DENSE_KINDS
    reports = []
    for kind in kinds:
        qhat = conformal_quantile(positive_scores(kind, **cal), alpha)
        cov = empirical_coverage(positive_scores(kind, **held), qhat)
        sizes = [int(keep_mask(kind, _signal(kind, sims), qhat).sum()) for sims in held_similarities]
        reports.append(
            KindReport(
                kind, qhat, cov, float(np.mean(sizes)) if sizes else math.nan, float(np.median(sizes)) if sizes else math.nan
            )
        )
    return reports


def _signal(kind: ScoreKind, values: npt.ArrayLike | dict[str, npt.ArrayLike]) -> npt.ArrayLike:
    if isinstance(values, dict):
        return values["hybrid" if kind.hybrid else "dense"]
    if kind.hybrid:
        raise UsageError("hybrid score kinds need the held-out queries' hybrid signal")
    return values


def choose_kind(reports: Sequence[KindReport], alpha: float, n_heldout: int, z: float = 2.0) -> tuple[ScoreKind, list[str]]:
    """The kind keeping the fewest chunks among those at coverage on the held-out split (ties: the
    better-covering kind).

    "At coverage" means held-out coverage >= (1-alpha) - z*sqrt(alpha(1-alpha)/m): the
    finite-sample guarantee is marginal, so an exact ">= 1-alpha" would reject correct
    thresholds half the time by chance. If no kind qualifies, the best-covering one wins.
    """
    notes: list[str] = []
    floor = (1 - alpha) - binomial_tolerance(1 - alpha, n_heldout, z)
    ok = [r for r in reports if r.coverage >= floor]
    if not ok:
        best = max(reports, key=lambda r: (r.coverage, -r.mean_set_size))
        notes.append(
            f"no score kind reached coverage {floor:.3f} on held-out data; chose the best covering "
            f"({best.kind.value}, {best.coverage:.3f})"
        )
        return best.kind, notes
    # equal sets: the better held-out coverage, then the simpler (earlier) kind
    return min(ok, key=lambda r: (r.mean_set_size, -r.coverage, list(ScoreKind).index(r.kind))).kind, notes
