"""Conformal quantile, scores and coverage (tools.conformal)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.conformal import (
    DENSE_KINDS,
    KindReport,
    ScoreKind,
    binomial_tolerance,
    candidate_scores,
    choose_kind,
    conformal_quantile,
    conformal_rank,
    empirical_coverage,
    evaluate_kinds,
    hybrid_signal,
    keep_mask,
    nonconformity,
    positive_scores,
    ranks_of,
    smallest_k_for_coverage,
)


def brute_quantile(scores, alpha):
    """Smallest observed s with #{scores <= s} >= (n+1)(1-alpha), else inf (the definition, by search)."""
    need = (len(scores) + 1) * (1 - alpha)
    for s in sorted(scores):
        if sum(1 for x in scores if x <= s) >= need - 1e-9:
            return s
    return math.inf


@pytest.mark.parametrize("seed", range(25))
def test_quantile_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    scores = list(rng.integers(0, 10, n).astype(float)) if seed % 2 else list(rng.normal(size=n))
    for alpha in (0.05, 0.1, 0.2, 0.33, 0.5):
        assert conformal_quantile(scores, alpha) == brute_quantile(scores, alpha)


def test_quantile_finite_sample_rank():
    assert conformal_rank(9, 0.1) == 9  # ceil(10 * 0.9) = 9, not 10 by float error
    assert conformal_rank(19, 0.1) == 18  # ceil(20 * 0.9)
    assert conformal_rank(100, 0.1) == 91  # ceil(101 * 0.9) = ceil(90.9)
    scores = list(range(1, 101))  # 1..100
    assert conformal_quantile(scores, 0.1) == 91  # a plain 90th percentile would say 90.1
    assert conformal_quantile([1.0, 2.0], 0.1) == math.inf  # ceil(3 * 0.9) = 3 > n
    assert conformal_quantile([1.0, math.inf, 3.0], 0.5) == 3.0


def test_bad_alpha_is_refused():
    with pytest.raises(UsageError, match="alpha"):
        conformal_quantile([1.0], 1.5)


def test_scores_are_the_formulas():
    s, t, r = np.array([0.8, 0.5]), 0.8, np.array([1, 4])
    assert np.allclose(nonconformity(ScoreKind.RAW, s, t, r), [0.2, 0.5])
    assert np.allclose(nonconformity(ScoreKind.GAP, s, t, r), [0.0, 0.3])
    assert np.allclose(nonconformity(ScoreKind.RATIO, s, t, r), [0.0, 1 - 0.5 / 0.8])
    assert np.allclose(nonconformity(ScoreKind.RANK, s, t, r), [1, 4])


def test_keep_mask_is_a_prefix_of_the_ranking():
    sims = np.array([0.2, 0.9, 0.5, 0.85, 0.1])
    assert list(ranks_of(sims)) == [4, 1, 3, 2, 5]
    assert list(keep_mask(ScoreKind.GAP, sims, 0.1)) == [False, True, False, True, False]
    assert list(keep_mask(ScoreKind.RANK, sims, 3)) == [False, True, True, True, False]
    assert list(keep_mask(ScoreKind.RAW, sims, 0.5)) == [False, True, True, True, False]
    for kind in ScoreKind:  # monotone: a better chunk never scores worse
        sc = candidate_scores(kind, sims)
        order = np.argsort(-sims)
        assert np.all(np.diff(sc[order]) >= -1e-12)


def test_coverage_by_simulation():
    """2,000 exchangeable draws: P(test score <= q) within binomial tolerance of 1-alpha (and >= it)."""
    rng = np.random.default_rng(1234)
    n, alpha, trials = 99, 0.1, 2000
    hits = 0
    for _ in range(trials):
        draws = rng.gamma(2.0, size=n + 1)
        q = conformal_quantile(draws[:n], alpha)
        hits += draws[n] <= q
    coverage = hits / trials
    expected = math.ceil((n + 1) * (1 - alpha)) / (n + 1)  # exact for continuous scores: 0.90
    assert abs(coverage - expected) <= binomial_tolerance(expected, trials, z=3.0)
    assert coverage >= (1 - alpha) - binomial_tolerance(1 - alpha, trials, z=3.0)


def test_evaluate_and_choose_kind():
    rng = np.random.default_rng(7)
    nq, nc = 300, 50

    def make(m):
        sims = rng.uniform(0, 0.6, (m, nc))
        pos = rng.integers(0, nc, m)
        sims[np.arange(m), pos] += rng.uniform(0.1, 0.4, m)
        top1 = sims.max(1)
        ranks = np.array([ranks_of(row)[p] for row, p in zip(sims, pos)])
        return {"similarity": sims[np.arange(m), pos], "top1": top1, "rank": ranks, "found": np.ones(m, dtype=bool)}, list(sims)

    cal, _ = make(nq)
    held, held_sims = make(nq)
    reports = evaluate_kinds(cal, held, held_sims, 0.1)
    assert [r.kind for r in reports] == list(DENSE_KINDS)  # no hybrid signal in these records
    for r in reports:
        assert abs(r.coverage - 0.9) <= binomial_tolerance(0.9, nq, z=3.0)
        assert 1 <= r.mean_set_size <= nc
    chosen, notes = choose_kind(reports, 0.1, nq)
    ok = [r for r in reports if r.coverage >= 0.9 - binomial_tolerance(0.9, nq)]
    assert chosen == min(ok, key=lambda r: r.mean_set_size).kind
    assert notes == []


def test_choose_kind_when_none_reaches_coverage():
    reports = [KindReport(ScoreKind.RAW, 0.3, 0.5, 3.0, 3), KindReport(ScoreKind.GAP, 0.1, 0.6, 9.0, 9)]
    chosen, notes = choose_kind(reports, 0.1, 100)
    assert chosen is ScoreKind.GAP and "no score kind" in notes[0]


def test_not_found_counts_as_uncovered_and_fixed_k():
    assert empirical_coverage([0.1, math.inf, 0.3], 0.5) == pytest.approx(2 / 3)
    assert smallest_k_for_coverage([1, 3, 2, math.inf], 0.75) == 3
    assert smallest_k_for_coverage([1, 3, 2, math.inf], 1.0) == math.inf


def test_hybrid_signal_is_rrf_of_dense_and_bm25_ranks():
    dense = [0.9, 0.1, 0.5, 0.3]
    bm25 = [0.0, 4.0, 2.0, 0.0]
    h = hybrid_signal(dense, bm25, k=60)
    # dense ranks 1, 4, 2, 3; BM25 ranks (positive scores only) -, 1, 2, -
    expected = [1 / 61, 1 / 64 + 1 / 61, 1 / 62 + 1 / 62, 1 / 63]
    assert h == pytest.approx(expected)
    assert list(ranks_of(h)) == [3.0, 2.0, 1.0, 4.0]  # in both lists beats top of one
    with pytest.raises(UsageError):
        hybrid_signal([0.1, 0.2], [1.0])
    with pytest.raises(UsageError):
        hybrid_signal([0.1], [1.0], k=0)


def test_hybrid_kinds_apply_rank_and_ratio_to_the_hybrid_signal():
    h = np.array([0.03, 0.02, 0.01])
    assert ScoreKind.HYBRID_RANK.hybrid and not ScoreKind.RANK.hybrid
    assert list(candidate_scores(ScoreKind.HYBRID_RANK, h)) == [1.0, 2.0, 3.0]
    assert candidate_scores(ScoreKind.HYBRID_RATIO, h) == pytest.approx([0.0, 1 / 3, 2 / 3])
    assert set(DENSE_KINDS) == set(ScoreKind) - {ScoreKind.HYBRID_RANK, ScoreKind.HYBRID_RATIO}


def test_hybrid_positive_scores_need_hybrid_records():
    dense_only = {"similarity": np.array([0.5]), "top1": np.array([0.6]), "rank": np.array([2.0]), "found": np.array([True])}
    with pytest.raises(UsageError, match="calibrate again"):
        positive_scores(ScoreKind.HYBRID_RANK, **dense_only)
    both = dense_only | {
        "hybrid": np.array([0.02]),
        "hybrid_top1": np.array([0.03]),
        "hybrid_rank": np.array([4.0]),
        "hybrid_found": np.array([True]),
    }
    assert list(positive_scores(ScoreKind.HYBRID_RANK, **both)) == [4.0]
    assert list(positive_scores(ScoreKind.RANK, **both)) == [2.0]
    assert positive_scores(ScoreKind.HYBRID_RATIO, **both) == pytest.approx([1 / 3])


def test_evaluate_kinds_adds_hybrid_kinds_when_records_carry_them():
    """Queries whose answer is ranked better by the hybrid signal than by similarity: the hybrid
    kinds reach coverage with smaller sets, and choose_kind picks one of them."""
    rng = np.random.default_rng(3)
    nq, nc = 200, 40

    def make(m):
        arrays = {k: [] for k in ("similarity", "top1", "rank", "found", "hybrid", "hybrid_top1", "hybrid_rank", "hybrid_found")}
        views = []
        for _ in range(m):
            dense = rng.uniform(0, 0.6, nc)
            bm25 = rng.uniform(0, 3, nc)
            pos = int(rng.integers(0, nc))
            dense[pos] += rng.uniform(0.0, 0.3)
            bm25[pos] += 3.0  # the answer's words are in the question: BM25 ranks it first
            h = hybrid_signal(dense, bm25)
            for key, value in (
                ("similarity", dense[pos]),
                ("top1", dense.max()),
                ("rank", ranks_of(dense)[pos]),
                ("found", True),
                ("hybrid", h[pos]),
                ("hybrid_top1", h.max()),
                ("hybrid_rank", ranks_of(h)[pos]),
                ("hybrid_found", True),
            ):
                arrays[key].append(value)
            views.append({"dense": dense, "hybrid": h})
        return {k: np.asarray(v) for k, v in arrays.items()}, views

    cal, _ = make(nq)
    held, views = make(nq)
    reports = evaluate_kinds(cal, held, views, 0.1)
    assert [r.kind for r in reports] == list(ScoreKind)
    by = {r.kind: r for r in reports}
    for r in reports:
        assert abs(r.coverage - 0.9) <= binomial_tolerance(0.9, nq, z=3.0)
    assert by[ScoreKind.HYBRID_RANK].mean_set_size < by[ScoreKind.RANK].mean_set_size
    chosen, _ = choose_kind(reports, 0.1, nq)
    assert chosen.hybrid
    # dense-only views cannot be counted for a hybrid kind
    with pytest.raises(UsageError):
        evaluate_kinds(cal, held, [v["dense"] for v in views], 0.1, kinds=[ScoreKind.HYBRID_RANK])


def test_choose_kind_breaks_size_ties_by_coverage():
    reports = [
        KindReport(ScoreKind.RANK, 10, 0.92, 10.0, 10),
        KindReport(ScoreKind.HYBRID_RANK, 10, 0.96, 10.0, 10),
        KindReport(ScoreKind.RAW, 0.5, 0.98, 19.0, 19),
    ]
    assert choose_kind(reports, 0.1, 50)[0] is ScoreKind.HYBRID_RANK
    reports[1] = KindReport(ScoreKind.HYBRID_RANK, 10, 0.92, 10.0, 10)
    assert choose_kind(reports, 0.1, 50)[0] is ScoreKind.RANK  # all equal: the earlier kind


def test_corpus_similarities_in_blocks_equal_one_product():
    from ragsieve.tools.index.search.dense import corpus_similarities

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(1000, 16)).astype(np.float32)
    q = rng.normal(size=16)
    whole = vectors.astype(np.float64) @ q
    assert np.allclose(corpus_similarities(vectors, q, block=97), whole, rtol=0, atol=1e-12)
    assert corpus_similarities(vectors[:0], q).shape == (0,)
