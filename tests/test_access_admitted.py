"""Filtered local search over an `Admitted` set: the same ranking as a search over its rows, never a row outside it."""
from __future__ import annotations

import numpy as np
import pytest

from ragsieve.tools.index.admitted import Admitted
from ragsieve.tools.index.query import dense as dense_mod
from ragsieve.tools.index.query.bm25 import BM25Index
from ragsieve.tools.index.query.dense import DenseIndex, filtered_ef


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
        assert got and all(r in a for r, _ in got) and len(got) == min(25, sum(s > 0 for s in
                                                                               bm25.score_rows(query, rows)))


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
    monkeypatch.setattr(dense_mod, "SCAN_ROWS", 100)  # the set is larger: the filtered graph walk answers
    recalls = []
    for q in v[:20]:
        got = [r for r, _ in index.search_admitted(q, a, 10)]
        assert len(got) == 10 and all(r in a for r in got)
        recalls.append(len(set(got) & set(_exact(v, rows, q, 10))) / 10)
    assert np.mean(recalls) >= 0.95
    monkeypatch.setattr(dense_mod, "SCAN_ROWS", 10_000)  # a set this small is ranked exactly
    for q in v[:5]:
        assert [r for r, _ in index.search_admitted(q, a, 10)] == _exact(v, rows, q, 10)
    monkeypatch.setattr(dense_mod, "SCAN_ROWS", 100)
    narrow = np.flatnonzero(np.random.default_rng(4).random(3000) < 0.1)  # above SCAN_ROWS, below WALK_SHARE
    for q in v[:5]:
        assert [r for r, _ in index.search_admitted(q, Admitted(narrow, 3000), 10)] == _exact(v, narrow, q, 10)
    assert index.search_admitted(v[0], Admitted([], 3000), 10) == []


def test_filtered_ef_widens_as_the_admitted_share_narrows():
    assert filtered_ef(128, 100, 1.0) == 128
    assert filtered_ef(128, 100, 0.5) == 256
    assert filtered_ef(64, 100, 0.5) == 200  # never below k
    assert filtered_ef(128, 100, 0.001) == dense_mod.MAX_FILTERED_EF


def test_milvus_filtered_ef_widens_as_the_admitted_share_narrows():
    from ragsieve.tools.index.milvus.search import FILTERED_EF, dense_params

    assert dense_params(100, None) == {"metric_type": "IP"}  # unfiltered: the index's own ef
    assert dense_params(100, [1, 2, 3])["params"]["ef"] == FILTERED_EF  # a list of rows, as before
    assert dense_params(100, None, filtered=True, share=0.5)["params"]["ef"] == FILTERED_EF
    assert dense_params(100, None, filtered=True, share=0.05)["params"]["ef"] == 10240
    assert dense_params(100, None, filtered=True, share=0.0001)["params"]["ef"] == 16384
