"""The approximate (IVF) nearest-neighbour pass of large indexes (`ragsieve.tools.index.sparse.ann`): it agrees with
the exact pass on a planted set, never reports a neighbour closer than the exact one, and is used only above
`sparse.APPROXIMATE_ABOVE` rows (small indexes keep the exact pass)."""

from __future__ import annotations

import numpy as np

import ragsieve.tools.index.sparse.ann as ann
import ragsieve.tools.index.sparse.subset as sparse
from ragsieve.tools.index.sparse.subset import nearest_neighbours, sparse_subset


def _planted(n_clustered=3000, n_lone=150, d=32, seed=0):
    """Chunks in tight topic clusters (10 per topic) plus `n_lone` isolated ones: the sparse information."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clustered // 10, d)).astype(np.float32)
    v = centres[np.repeat(np.arange(len(centres)), 10)] + 0.15 * rng.normal(size=(n_clustered, d)).astype(np.float32)
    lone = rng.normal(size=(n_lone, d)).astype(np.float32)
    v = np.vstack([v, lone])
    return v / np.linalg.norm(v, axis=1, keepdims=True), np.arange(n_clustered, n_clustered + n_lone)


def test_ivf_agrees_with_the_exact_pass_on_a_planted_set():
    v, lone = _planted()
    exact_sim, _ = nearest_neighbours(v, exact=True)
    sim, row = ann.ivf_nearest_neighbours(v, nlist=32, nprobe=4)
    assert (sim <= exact_sim + 1e-5).all()  # a lower bound: a missed neighbour only makes a row look sparser
    assert np.mean(np.abs(sim - exact_sim) < 1e-5) >= 0.97
    found = (v[np.arange(len(v))] * v[row]).sum(axis=1)  # the reported row is a real other row at that similarity
    assert (row != np.arange(len(v))).all() and np.allclose(found, sim, atol=1e-5)
    exact_subset, approx_subset = sparse_subset(exact_sim, 5.0), sparse_subset(sim, 5.0)
    assert set(lone) <= set(approx_subset.rows)  # every planted lone chunk is found sparse
    agreement = len(set(exact_subset.rows) & set(approx_subset.rows)) / len(exact_subset.rows)
    assert agreement >= 0.95


def test_the_approximate_pass_runs_only_above_the_threshold(monkeypatch):
    v, _ = _planted(n_clustered=600, n_lone=20)
    calls = []
    real = ann.ivf_nearest_neighbours
    monkeypatch.setattr(ann, "ivf_nearest_neighbours", lambda x, *a, **k: calls.append(len(x)) or real(x, *a, **k))
    brute = v @ v.T
    np.fill_diagonal(brute, -np.inf)
    sim, row = nearest_neighbours(v)  # 620 rows, far below the threshold: exact
    assert calls == [] and np.allclose(sim, brute.max(axis=1), atol=1e-6) and (row == brute.argmax(axis=1)).all()
    monkeypatch.setattr(sparse, "APPROXIMATE_ABOVE", 500)
    approx, _ = nearest_neighbours(v)
    assert calls == [620] and (approx <= brute.max(axis=1) + 1e-5).all()
    assert nearest_neighbours(v, exact=True)[0].tolist() == sim.tolist()  # exact=True ignores the threshold


def test_ivf_is_deterministic_and_handles_tiny_inputs():
    v, _ = _planted(n_clustered=400, n_lone=10)
    a, b = ann.ivf_nearest_neighbours(v, nlist=16), ann.ivf_nearest_neighbours(v, nlist=16)
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
    one = ann.ivf_nearest_neighbours(v[:1])
    assert one[0].tolist() == [-np.inf] and one[1].tolist() == [-1]
    two_sim, two_row = ann.ivf_nearest_neighbours(v[:2], nlist=16)
    assert two_row.tolist() == [1, 0] and np.isclose(two_sim[0], float(v[0] @ v[1]))
