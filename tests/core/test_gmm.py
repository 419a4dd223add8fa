"""GMM outlier filter (tools.gmm): features exactly as Bulgakov's formulas, determinism, skips, plot."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.gmm import GMMOutlierFilter, distance_features, distances, plot_outliers

# three 2-D vectors: centroid c = (1, 1); query q = (0, 0)
V = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
Q = np.array([0.0, 0.0])
DC = [math.sqrt(2), math.sqrt(5), math.sqrt(5)]  # |v - c|
DQ = [0.0, 3.0, 3.0]  # |v - q|


def test_distances_hand_computed():
    d_c, d_q = distances(V, Q)
    assert np.allclose(d_c, DC) and np.allclose(d_q, DQ)


def test_feature_methods_hand_computed():
    """Eqs. 3-4: the distances are weighted first, d_c by (1 - alpha) and d_q by alpha, then combined."""
    a = 0.3
    wc, wq = [(1 - a) * c for c in DC], [a * q for q in DQ]
    assert np.allclose(distance_features(V, Q, "concatenate", alpha=a), np.column_stack([wc, wq]))
    assert np.allclose(distance_features(V, Q, "weighted_sum", alpha=a)[:, 0], [a * q + (1 - a) * c for c, q in zip(DC, DQ)])
    eps = 1e-8
    expected = [[c, q, c * q, c / (q + eps)] for c, q in zip(wc, wq)]
    assert np.allclose(distance_features(V, Q, "interaction", alpha=a), expected)
    poly = distance_features(V, Q, "polynomial", alpha=a, degree=2)
    assert np.allclose(poly, [[c, q, c * c, c * q, q * q] for c, q in zip(wc, wq)])
    assert distance_features(V, Q, "polynomial", degree=3).shape == (3, 9)


def test_alpha_changes_every_feature_method_and_the_interaction_flags():
    v, q = _cloud(seed=5)
    for method in ("concatenate", "weighted_sum", "interaction", "polynomial"):
        f0, f5, f1 = (distance_features(v, q, method, alpha=a) for a in (0.0, 0.5, 1.0))
        assert not np.allclose(f0, f5) and not np.allclose(f5, f1)
    flags = {a: GMMOutlierFilter(method="interaction", alpha=a, seed=3).run(v, q).counts for a in (0.0, 0.5, 1.0)}
    assert len({tuple(c) for c in flags.values()}) > 1  # alpha moves the PCA axes, hence the flags


def test_bad_method_lists_valid_values():
    with pytest.raises(UsageError, match="interaction"):
        distance_features(V, Q, "cubic")
    with pytest.raises(UsageError, match="percentile"):
        GMMOutlierFilter(percentile=150)


def test_a_frequency_above_the_number_of_runs_is_refused_not_a_filter_that_never_flags():
    """One component on PCA 2 and 3 is 2 runs: the shipped min_outlier_freq 4 could never be reached."""
    with pytest.raises(UsageError, match="min_outlier_freq 4 exceeds the 2 runs"):
        GMMOutlierFilter(n_components=[1], min_outlier_freq=4)
    assert GMMOutlierFilter(n_components=[1], min_outlier_freq=2).min_outlier_freq == 2
    from ragsieve.agent.config import Config
    from ragsieve.agent.plan.plans import get_plan

    with pytest.raises(UsageError, match="refuses its settings: min_outlier_freq 4 exceeds"):
        get_plan("full", Config.model_validate({"outliers": {"n_components": [1]}}))


def _cloud(seed=0, n=30, far=3, planted="opposite"):
    """`n` unit vectors, the last `far` of them planted: "opposite" the query (off-topic), "orthogonal" to it
    (unrelated, cosine 0), or "on_topic" (drawn like the others: the control)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=16)
    q /= np.linalg.norm(q)
    near = q + 0.15 * rng.normal(size=(n - far, 16))
    if planted == "opposite":
        outliers = -q + 0.1 * rng.normal(size=(far, 16))
    elif planted == "orthogonal":
        outliers = rng.normal(size=(far, 16))
        outliers -= np.outer(outliers @ q, q)
    else:
        outliers = q + 0.15 * rng.normal(size=(far, 16))
    v = np.vstack([near, outliers])
    return v / np.linalg.norm(v, axis=1, keepdims=True), q


def test_runs_are_deterministic_and_counted():
    v, q = _cloud()
    flt = GMMOutlierFilter(seed=3)
    a, b = flt.run(v, q), flt.run(v, q)
    assert a.outliers == b.outliers and a.counts == b.counts
    assert [r.flagged for r in a.runs] == [r.flagged for r in b.runs]
    assert a.completed_runs == 6
    assert [(r.n_components, r.pca_dim) for r in a.runs] == [(k, d) for k in (4, 5, 6) for d in (2, 3)]
    for r in a.runs:  # the percentile flags that share of the candidates in every run
        assert 0 < len(r.flagged) <= math.ceil(0.15 * len(v))
    # a chunk is an outlier exactly when flagged >= min_outlier_freq times over the K x PCA loop
    counts = np.zeros(len(v), dtype=int)
    for r in a.runs:
        counts[r.flagged] += 1
    assert list(counts) == a.counts
    assert a.outliers == [bool(c >= 2) for c in counts]
    strict = GMMOutlierFilter(seed=3, min_outlier_freq=6).run(v, q)
    assert strict.outliers == [bool(c >= 6) for c in counts]


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_a_single_gaussian_flags_the_planted_outlier_a_hand_computed_density_puts_in_its_tail(alpha):
    """A reference that shares no code with the filter: with one feature (weighted_sum, eqs. 3-4) and one
    component, the log-likelihood is affine in -(f - mean f)^2, so the flagged chunks are those below its
    15th percentile, by hand. The planted far chunk is flagged; the chunk nearest the feature's mean is not."""
    v, q = _cloud(seed=2, n=20, far=1)
    f = alpha * np.linalg.norm(v - q, axis=1) + (1 - alpha) * np.linalg.norm(v - v.mean(axis=0), axis=1)
    s = -((f - f.mean()) ** 2)
    hand = [bool(x < np.percentile(s, 15.0)) for x in s]
    result = GMMOutlierFilter(method="weighted_sum", alpha=alpha, n_components=[1], pca_dims=[1], min_outlier_freq=1).run(v, q)
    assert result.completed_runs == 1 and result.outliers == hand
    assert result.outliers[19] and not result.outliers[int(np.argmax(s))]


def test_protect_top_never_flags_the_best():
    v, q = _cloud()
    plain = GMMOutlierFilter(seed=0, min_outlier_freq=1).run(v, q)
    first = plain.outliers.index(True)
    protected = GMMOutlierFilter(seed=0, min_outlier_freq=1, protect_top=first + 1).run(v, q)
    assert not any(protected.outliers[: first + 1])
    assert protected.outliers[first + 1 :] == plain.outliers[first + 1 :]


def test_too_few_candidates_skip_runs_with_notes():
    v, q = _cloud(n=9, far=1)
    result = GMMOutlierFilter().run(v, q)  # k=4 needs 8, k=5 needs 10, k=6 needs 12
    skipped = [r for r in result.runs if r.skipped]
    assert {r.n_components for r in skipped} == {5, 6}
    assert all("9 candidates" in r.note for r in skipped)
    assert result.completed_runs == 2
    tiny = GMMOutlierFilter().run(v[:3], q)
    assert tiny.completed_runs == 0 and not any(tiny.outliers) and "too few" in tiny.notes[0]


def test_pca_larger_than_features_is_noted():
    v, q = _cloud()
    result = GMMOutlierFilter(method="concatenate", pca_dims=[3], n_components=[4], min_outlier_freq=1).run(v, q)
    assert "not applied" in result.runs[0].note


def test_plot_writes_png(tmp_path):
    v, q = _cloud()
    result = GMMOutlierFilter().run(v, q)
    out = plot_outliers(v, q, result.outliers, tmp_path / "fig" / "outliers.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# the paper's settings (arXiv:2407.01403 and its authors' run script): interaction features, alpha 0.5, PCA to
# 2 and 3, K = 4, 5, 6 components, the 15th-percentile log-likelihood, flagged in >= 2 of the 6 runs
PAPER = {
    "method": "interaction",
    "alpha": 0.5,
    "pca_dims": [2, 3],
    "n_components": [4, 5, 6],
    "percentile": 15.0,
    "min_outlier_freq": 2,
    "protect_top": 0,
}


def test_planted_far_outliers_are_not_what_the_papers_gmm_flags():
    """A measured property of the method as the paper and its authors' code define it (and why `outliers.enabled`
    is off by default): with 4-6 full-covariance components on 20 candidates, a chunk far from all others gets
    a component of its own, whose covariance is the mixture's regularisation floor (sklearn's reg_covar, 1e-6),
    so its log-likelihood is the pool's *highest*; the 15th-percentile tail falls among the chunks near the
    query. So neither a lone planted chunk nor a small off-topic cluster is flagged, with or without eq. 9's
    standardisation; a rule that flagged the high-likelihood end instead would flag them."""
    planted, near = 0, 0
    for seed in range(6):
        for far in (1, 2, 3):
            v, q = _cloud(seed=seed, n=20, far=far)
            d_c, d_q = distances(v, q)
            assert set(np.argsort(-d_q)[:far]) == set(range(20 - far, 20))  # the planted are the farthest from q
            for standardize in (False, True):
                result = GMMOutlierFilter(**PAPER, standardize=standardize).run(v, q)
                assert result.completed_runs == 6
                planted += sum(result.outliers[20 - far :])
                near += sum(result.outliers[: 20 - far])
    assert planted == 0 and near > 0


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("planted", ["opposite", "orthogonal"])
def test_one_component_on_the_papers_features_flags_a_planted_off_topic_chunk_and_not_an_on_topic_one(planted, standardize):
    """Where the paper's rule (lowest log-likelihood, eqs. 3-4 interaction features, PCA 2 and 3, 15th
    percentile, flagged in both runs) does flag an isolated off-topic chunk: with one Gaussian component, whose
    tail is where a far chunk lies (with K >= 2 it gets a component of its own: the test above). On 20 seeded
    pools of 19 chunks near the query, the planted off-topic chunk (index 19) is flagged in every pool, and so is
    a planted pair; the control, the same pools with index 19 drawn near the query like the others, is flagged
    at chance level (at most 5 of 20; measured 2-3), so a filter that flagged by position or flagged everything
    fails here, as does one that flagged the high-likelihood end (the planted chunk is never there)."""
    one = {**PAPER, "n_components": [1], "standardize": standardize}
    lone = [GMMOutlierFilter(**one).run(*_cloud(seed=s, n=20, far=1, planted=planted)).outliers for s in range(20)]
    pair = [GMMOutlierFilter(**one).run(*_cloud(seed=s, n=20, far=2, planted=planted)).outliers for s in range(20)]
    control = [GMMOutlierFilter(**one).run(*_cloud(seed=s, n=20, far=1, planted="on_topic")).outliers for s in range(20)]
    assert all(flags[19] for flags in lone)
    assert all(flags[18] and flags[19] for flags in pair)
    assert sum(flags[19] for flags in control) <= 5
    assert all(sum(flags) <= math.ceil(0.15 * 20) for flags in lone + pair + control)  # one run's tail at most
