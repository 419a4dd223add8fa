"""Filtered local search over an `Admitted` set: the same ranking as a search over its rows, never a row outside it."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.tools.index.search import dense as dense_mod
from ragsieve.tools.index.search.admitted import Admitted
from ragsieve.tools.index.search.bm25 import BM25Index
from ragsieve.tools.index.search.dense import DenseIndex, filtered_ef, walk_pays


def _clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 20), dim)).astype(np.float32)
    v = centres[rng.integers(0, len(centres), n)] + 0.3 * rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _exact(vectors: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    sims = vectors[rows] @ q
    return [int(rows[i]) for i in np.lexsort((rows, -sims))[:k]]


def test_admitted_mask_membership_and_selector_agree():
    faiss = pytest.importorskip("faiss")
    a = Admitted([9, 3, 3, 0, 17], 20)
    assert a.tolist() == [0, 3, 9, 17] and len(a) == 4 and a.fraction == pytest.approx(0.2)
    assert a.mask.sum() == 4 and a.mask[[0, 3, 9, 17]].all()
    assert 3 in a and 4 not in a and 20 not in a and -1 not in a and "3" not in a
    sel = a.selector()
    assert isinstance(sel, faiss.IDSelectorBitmap)
    assert [r for r in range(20) if sel.is_member(r)] == [0, 3, 9, 17]  # FAISS reads the bitmap as we wrote it
    with pytest.raises(ValueError, match="outside"):
        Admitted([20], 20)
    with pytest.raises(ValueError):
        a.rows[0] = 5  # read-only: a cached set is shared by every query


@pytest.mark.parametrize("fraction", [0.5, 0.05])
def test_bm25_within_an_admitted_set_ranks_as_over_its_rows(fraction):
    rng = np.random.default_rng(1)
    vocab = [f"t{i}" for i in range(60)]
    texts = [" ".join(rng.choice(vocab, 12)) for _ in range(800)]
    bm25 = BM25Index().build(texts)
    rows = np.flatnonzero(rng.random(800) < fraction)
    a = Admitted(rows, 800)
    for query in ("t1 t2", "t5", "t7 t8 t9 t10"):
        got = bm25.search_admitted(query, 25, a)
        assert got == bm25.search(query, 25, rows.tolist())
        assert got and all(r in a for r, _ in got) and len(got) == min(25, sum(s > 0 for s in bm25.score_rows(query, rows)))


@pytest.mark.parametrize("fraction", [0.5, 0.05])  # a FAISS scan skipping the other rows; the rows' vectors ranked
def test_flat_dense_within_an_admitted_set_is_exact(fraction):
    v = _clustered(2000)
    index = DenseIndex("flat").build(v)
    rows = np.flatnonzero(np.random.default_rng(2).random(2000) < fraction)
    for q in v[:8]:
        assert [r for r, _ in index.search_admitted(q, Admitted(rows, 2000), 20)] == _exact(v, rows, q, 20)


def test_hnsw_within_a_broad_set_walks_the_graph_and_keeps_only_admitted_rows(monkeypatch):
    pytest.importorskip("faiss")
    v = _clustered(3000)
    index = DenseIndex("hnsw", hnsw_m=16, ef_search=32).build(v)
    rows = np.flatnonzero(np.random.default_rng(3).random(3000) < 0.5)
    a = Admitted(rows, 3000)
    walks: list[tuple[int, int]] = []

    def walk_always(admitted: int, ef: int, hnsw_m: int) -> bool:
        walks.append((admitted, ef))
        return True

    monkeypatch.setattr(dense_mod, "walk_pays", walk_always)  # the filtered graph walk answers
    recalls = []
    for q in v[:20]:
        got = [r for r, _ in index.search_admitted(q, a, 10)]
        assert len(got) == 10 and all(r in a for r in got)
        recalls.append(len(set(got) & set(_exact(v, rows, q, 10))) / 10)
    assert np.mean(recalls) >= 0.95
    assert walks and walks[0] == (len(rows), filtered_ef(32, 10, a.fraction))
    monkeypatch.setattr(dense_mod, "walk_pays", lambda admitted, ef, hnsw_m: False)  # the exact scan answers
    narrow = np.flatnonzero(np.random.default_rng(4).random(3000) < 0.01)  # gathered, not scanned by bitmap
    for q in v[:5]:
        assert [r for r, _ in index.search_admitted(q, a, 10)] == _exact(v, rows, q, 10)
        assert [r for r, _ in index.search_admitted(q, Admitted(narrow, 3000), 10)] == _exact(v, narrow, q, 10)
    assert index.search_admitted(v[0], Admitted([], 3000), 10) == []


def test_hnsw_within_a_quarter_of_the_rows_is_exact_where_the_walk_missed_hits():
    """Seeded: 40k rows, M 8, a quarter admitted. The walk the search used to take here (over 8,192 rows and
    at least 20 % admitted: ef 128/share) misses some of a query's admitted top 100; the cost model
    (`walk_pays`: 10k rows < 2M x ef 1024) now scans the admitted rows, which ranks them exactly."""
    faiss = pytest.importorskip("faiss")
    faiss.omp_set_num_threads(1)  # a graph built on one thread is the same graph every run
    v = _clustered(40_000, seed=5)
    index = DenseIndex("hnsw", hnsw_m=8, ef_search=128, ef_construction=40).build(v)
    rows = np.flatnonzero(np.random.default_rng(6).random(40_000) < 0.25)
    a = Admitted(rows, 40_000)
    queries = v[np.random.default_rng(7).choice(40_000, 12, replace=False)]
    old_walk = faiss.SearchParametersHNSW(sel=a.selector(), efSearch=int(np.ceil(128 / a.fraction)))
    missed = 0
    for q in queries:
        want = _exact(v, rows, q, 100)
        assert [r for r, _ in index.search_admitted(q, a, 100)] == want
        _, ids = index._index.search(q.reshape(1, -1), 100, params=old_walk)
        missed += len(set(want) - set(ids[0].tolist()))
    assert missed > 0  # the set is one where the old setting loses filtered hits


def test_the_cost_model_walks_only_a_broad_share_of_a_large_index():
    assert filtered_ef(128, 100, 1.0) == 128  # every row admitted: the unfiltered walk's own list
    assert filtered_ef(128, 100, 0.5) == 2 * 256  # WALK_WIDTH times the unfiltered budget per admitted row
    assert filtered_ef(64, 100, 0.5) == 400  # never below k
    assert filtered_ef(128, 100, 0.001) == dense_mod.MAX_FILTERED_EF
    assert walk_pays(49_540, filtered_ef(128, 100, 0.4954), 32)  # 100k rows, half admitted: walk
    assert not walk_pays(24_920, filtered_ef(128, 100, 0.2492), 32)  # a quarter: scan
    assert not walk_pays(5_060, filtered_ef(128, 100, 0.0506), 32)
    assert walk_pays(200_000, filtered_ef(128, 100, 0.2), 16)  # 1M rows, a fifth admitted: walk
    assert not walk_pays(50_000, filtered_ef(128, 100, 0.05), 16)


def test_milvus_filtered_ef_widens_as_the_admitted_share_narrows():
    from ragsieve.tools.index.milvus.search import FILTERED_EF, dense_params

    assert dense_params(100, None) == {"metric_type": "IP"}  # unfiltered: the index's own ef
    assert dense_params(100, [1, 2, 3])["params"]["ef"] == FILTERED_EF  # a list of rows, as before
    assert dense_params(100, None, filtered=True, share=0.5)["params"]["ef"] == FILTERED_EF
    assert dense_params(100, None, filtered=True, share=0.05)["params"]["ef"] == 10240
    assert dense_params(100, None, filtered=True, share=0.0001)["params"]["ef"] == 16384
