"""GMM outlier filter for retrieved chunks (Bulgakov 2024).

V. Bulgakov, "Optimization of Retrieval-Augmented Generation Context with Outlier
Detection", arXiv:2407.01403 (2024). For retrieved vectors v_i, the query q and the
centroid c of the retrieved vectors:

    d_c = (1 - alpha) * ||v_i - c||,  d_q = alpha * ||v_i - q||     (eqs. 3-4: weighted first)
    concatenate  : [d_c, d_q]
    weighted_sum : d_q + d_c
    interaction  : [d_c, d_q, d_c * d_q, d_c / (d_q + eps)]
    polynomial   : all monomials of [d_c, d_q] up to `degree` (no bias term)

The weighting comes before any combination, so alpha changes every method: it moves
the principal axes the PCA keeps (features are centred, not standardised, by default;
`standardize=True` scales each column to unit variance, which undoes a per-column
weight and leaves alpha acting only through weighted_sum and the cross terms'
relative size). For each PCA dimension in a list and each GMM component
count in a list a GaussianMixture (full covariance, seeded) is fitted, every chunk's
log-likelihood computed, and chunks below the `percentile`-th log-likelihood flagged.
A chunk is an outlier when flagged at least `min_outlier_freq` times over the runs.
As in the paper's code, a PCA dimension larger than the feature count is not applied
(the standardised features are used, with a note). A run with fewer than
2 * n_components candidates is skipped with a note.

What the rule flags (issue 46, measured; the code follows the paper's and its authors' code: features,
weighting, fit on all candidates, lowest-likelihood percentile, count over the runs). With K >= 2 components
on ~20 candidates, a chunk far from all others gets a component of its own whose covariance is the mixture's
regularisation floor (sklearn's `reg_covar`, 1e-6), so its log-likelihood is the pool's highest and it is
never flagged; the tail falls in the populated components, often among the chunks nearest the query (the
interaction ratio d_c / d_q is largest there: the authors' code never flags the best four). A lone off-topic
chunk, or an off-topic pair, is in the tail only with one component (`n_components = [1]`). On 60 HotpotQA
pools (the 19 chunks most similar to the question and one of the 200 least similar), the paper's K 4-6 with
min_outlier_freq 2 flagged the planted chunk on 3 of 60 questions, and an on-topic 20th chunk in its place on
17; one component flagged the planted chunk on 60 of 60 and the on-topic one on 9
(benchmarks/results/filters-gmm-planted.json, benchmarks/gmm_planted.py; tests/core/test_gmm.py, synthetic).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.modes import parse_enum

log = logging.getLogger(__name__)

EPS = 1e-8
MIN_SAMPLES_PER_COMPONENT = 2


class FeatureMethod(str, Enum):
    CONCATENATE = "concatenate"
    WEIGHTED_SUM = "weighted_sum"
    INTERACTION = "interaction"
    POLYNOMIAL = "polynomial"


def distances(vectors: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d_c, d_q): Euclidean distance of each vector to the vectors' centroid and to the query."""
    v = np.asarray(vectors, dtype=float)
    q = np.asarray(query, dtype=float).reshape(-1)
    if v.ndim != 2 or v.shape[1] != q.size:
        raise UsageError(f"vectors {v.shape} and query {q.shape} do not match")
    c = v.mean(axis=0)
    return np.linalg.norm(v - c, axis=1), np.linalg.norm(v - q, axis=1)


def weighted_distances(vectors: np.ndarray, query: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """((1 - alpha) * d_c, alpha * d_q): the paper's weighting, applied before any feature is formed."""
    d_c, d_q = distances(vectors, query)
    return (1.0 - alpha) * d_c, alpha * d_q


def _polynomial(d_c: np.ndarray, d_q: np.ndarray, degree: int) -> np.ndarray:
    cols = [d_c ** (total - j) * d_q**j for total in range(1, degree + 1) for j in range(total + 1)]
    return np.column_stack(cols)


def distance_features(
    vectors: np.ndarray,
    query: np.ndarray,
    method: "FeatureMethod | str" = FeatureMethod.INTERACTION,
    alpha: float = 0.5,
    degree: int = 2,
    eps: float = EPS,
) -> np.ndarray:
    """The paper's feature matrix (n x f) for one feature method."""
    method = parse_enum(FeatureMethod, method, "feature method")
    d_c, d_q = weighted_distances(vectors, query, alpha)
    if method is FeatureMethod.CONCATENATE:
        return np.column_stack([d_c, d_q])
    if method is FeatureMethod.WEIGHTED_SUM:
        return (d_q + d_c).reshape(-1, 1)
    if method is FeatureMethod.INTERACTION:
        return np.column_stack([d_c, d_q, d_c * d_q, d_c / (d_q + eps)])
    return _polynomial(d_c, d_q, degree)


@dataclass
class GMMRun:
    n_components: int
    pca_dim: int
    skipped: bool = False
    note: str = ""
    flagged: list[int] = field(default_factory=list)
    threshold: float | None = None

    def as_dict(self) -> dict:
        return {
            "k": self.n_components,
            "pca": self.pca_dim,
            "skipped": self.skipped,
            "note": self.note,
            "flagged": list(self.flagged),
            "threshold": None if self.threshold is None else round(self.threshold, 4),
        }


@dataclass
class OutlierResult:
    """`outliers[i]` is True when candidate i is an outlier; `counts[i]` how often it was flagged."""

    outliers: list[bool]
    counts: list[int]
    runs: list[GMMRun]
    notes: list[str] = field(default_factory=list)

    @property
    def completed_runs(self) -> int:
        return sum(1 for r in self.runs if not r.skipped)


class GMMOutlierFilter:
    """Configured once, then `run(vectors, query)` per question."""

    def __init__(
        self,
        method: "FeatureMethod | str" = FeatureMethod.INTERACTION,
        alpha: float = 0.5,
        pca_dims: tuple[int, ...] | list[int] = (2, 3),
        n_components: tuple[int, ...] | list[int] = (4, 5, 6),
        percentile: float = 15.0,
        min_outlier_freq: int = 2,
        degree: int = 2,
        seed: int = 0,
        protect_top: int = 0,
        standardize: bool = False,
    ) -> None:
        self.method = parse_enum(FeatureMethod, method, "feature method")
        if not 0.0 <= alpha <= 1.0:
            raise UsageError(f"GMM feature alpha must be in [0, 1], got {alpha}")
        if not pca_dims or any(int(d) < 1 for d in pca_dims):
            raise UsageError(f"pca_dims must be a non-empty list of integers >= 1, got {list(pca_dims)}")
        if not n_components or any(int(k) < 1 for k in n_components):
            raise UsageError(f"n_components must be a non-empty list of integers >= 1, got {list(n_components)}")
        if not 0.0 < percentile < 100.0:
            raise UsageError(f"percentile must be in (0, 100), got {percentile}")
        if min_outlier_freq < 1:
            raise UsageError(f"min_outlier_freq must be >= 1, got {min_outlier_freq}")
        runs = len(pca_dims) * len(n_components)
        if min_outlier_freq > runs:  # refused, not silently a filter that never flags
            raise UsageError(
                f"min_outlier_freq {min_outlier_freq} exceeds the {runs} runs (pca_dims x n_components "
                f"= {len(pca_dims)} x {len(n_components)}): no chunk could be flagged"
            )
        if degree < 1:
            raise UsageError(f"polynomial degree must be >= 1, got {degree}")
        if protect_top < 0:
            raise UsageError(f"protect_top must be >= 0, got {protect_top}")
        self.alpha, self.degree, self.seed = float(alpha), int(degree), int(seed)
        self.pca_dims = [int(d) for d in pca_dims]
        self.n_components = [int(k) for k in n_components]
        self.percentile, self.min_outlier_freq, self.protect_top = float(percentile), int(min_outlier_freq), int(protect_top)
        self.standardize = bool(standardize)

    def features(self, vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Centred features (standardised with `standardize`; zero-variance columns stay 0)."""
        from sklearn.preprocessing import StandardScaler

        raw = distance_features(vectors, query, self.method, self.alpha, self.degree)
        return StandardScaler(with_std=self.standardize).fit_transform(raw)

    def run(self, vectors: np.ndarray, query: np.ndarray) -> OutlierResult:
        """Flag outliers among `vectors` (best first when `protect_top` > 0) for `query`."""
        from threadpoolctl import threadpool_limits

        # tens of points: one BLAS/OpenMP thread is fastest and avoids oversubscribing shared cores
        with threadpool_limits(limits=1):
            return self._run(vectors, query)

    def _run(self, vectors: np.ndarray, query: np.ndarray) -> OutlierResult:
        from sklearn.decomposition import PCA
        from sklearn.mixture import GaussianMixture

        n = len(vectors)
        counts = np.zeros(n, dtype=int)
        runs: list[GMMRun] = []
        notes: list[str] = []
        if n == 0:
            return OutlierResult([], [], [], ["no candidates"])
        feats = self.features(vectors, query)
        for k in self.n_components:
            for dim in self.pca_dims:
                run = GMMRun(k, dim)
                runs.append(run)
                need = MIN_SAMPLES_PER_COMPONENT * k
                if n < need:
                    run.skipped, run.note = True, f"skipped: {n} candidates < {need} needed for {k} components"
                    continue
                if dim <= min(feats.shape):
                    x = PCA(n_components=dim, svd_solver="full").fit_transform(feats)
                else:
                    x = feats
                    run.note = f"PCA to {dim} not applied: only {feats.shape[1]} features"
                gmm = GaussianMixture(n_components=k, covariance_type="full", random_state=self.seed).fit(x)
                ll = gmm.score_samples(x)
                run.threshold = float(np.percentile(ll, self.percentile))
                run.flagged = [int(i) for i in np.flatnonzero(ll < run.threshold)]
                counts[run.flagged] += 1
        if not any(not r.skipped for r in runs):
            notes.append(f"every run skipped: {n} candidates are too few for the smallest GMM")
        outliers = self.decide(counts)
        return OutlierResult([bool(x) for x in outliers], [int(c) for c in counts], runs, notes)

    def decide(self, counts: "np.ndarray | list[int]") -> np.ndarray:
        """Outlier flags from per-candidate flag counts: at least `min_outlier_freq`, the top `protect_top` exempt."""
        outliers = np.asarray(counts) >= self.min_outlier_freq
        if self.protect_top:
            outliers[: self.protect_top] = False
        return outliers


def plot_outliers(
    vectors: np.ndarray,
    query: np.ndarray,
    outliers: list[bool],
    path: str | Path,
    *,
    flt: GMMOutlierFilter | None = None,
    labels: list[str] | None = None,
    title: str = "",
) -> Path:
    """PNG of the first two principal components of the features, coloured by GMM cluster
    (the smallest configured component count), outliers circled in red (the paper's Figure 2)."""
    matplotlib = require(Extra.EVAL, "matplotlib", "the outlier plot (outliers.plot)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    flt = flt or GMMOutlierFilter()
    feats = flt.features(vectors, query)
    dims = min(2, *feats.shape)
    x = PCA(n_components=dims, svd_solver="full").fit_transform(feats) if dims >= 1 else feats
    if x.shape[1] == 1:
        x = np.column_stack([x[:, 0], np.zeros(len(x))])
    k = min(flt.n_components)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        clusters = (
            GaussianMixture(n_components=k, random_state=flt.seed).fit_predict(x)
            if len(x) >= MIN_SAMPLES_PER_COMPONENT * k
            else np.zeros(len(x), dtype=int)
        )
    mask = np.asarray(outliers, dtype=bool)
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(x[:, 0], x[:, 1], c=clusters, cmap="tab10", s=36)
    ax.scatter(x[mask, 0], x[mask, 1], s=160, facecolors="none", edgecolors="red", linewidths=1.5, label="outlier")
    for i, text in enumerate(labels or []):
        ax.annotate(text, (x[i, 0], x[i, 1]), fontsize=7)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title or f"{flt.method.value} features, GMM k={k}")
    ax.legend(loc="best")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out
