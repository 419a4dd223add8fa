"""The sparse-information subset against brute-force references."""

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.sparse.subset import cosmix_scores, find_sparse_rows, nearest_neighbour_similarity


def _normalised(rng, n, d):
    v = rng.normal(size=(n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_nearest_neighbour_matches_brute_force_across_blocks():
    rng = np.random.default_rng(0)
    v = _normalised(rng, 37, 8)
    expected = [max(float(v[i] @ v[j]) for j in range(37) if j != i) for i in range(37)]
    got = nearest_neighbour_similarity(v, block=5)
    assert np.allclose(got, expected, atol=1e-6)


def test_sparse_subset_is_the_corpus_percentile_of_nearest_neighbour_similarity():
    """Relative to the corpus: about `percentile` % of the chunks, the least reinforced ones."""
    rng = np.random.default_rng(1)
    base = _normalised(rng, 10, 16)
    # 90 near-duplicates of 10 topics, 10 lone chunks: the lone ones are the sparse subset
    dupes = base[np.repeat(np.arange(10), 9)] + 0.05 * rng.normal(size=(90, 16)).astype(np.float32)
    lone = _normalised(rng, 10, 16)
    v = np.vstack([dupes / np.linalg.norm(dupes, axis=1, keepdims=True), lone])
    subset = find_sparse_rows(v, percentile=10.0)
    nn = nearest_neighbour_similarity(v)
    assert subset.rows == sorted(np.flatnonzero(nn < np.percentile(nn, 10.0)).tolist())
    assert 8 <= len(subset.rows) <= 10 and set(subset.rows) <= set(range(90, 100))


def test_cosmix_score_adds_the_distance_to_the_nearest_neighbour():
    sims = np.array([0.5, 0.5, 0.6])
    nn = np.array([0.9, 0.3, 0.95])
    scores = cosmix_scores(sims, nn, distance_weight=0.5)
    assert np.allclose(scores, [0.5 + 0.05, 0.5 + 0.35, 0.6 + 0.025])
    assert np.argmax(scores) == 1  # equally close to the question, found nowhere else: first
    assert np.allclose(cosmix_scores(sims, nn, 0.0), sims)


def test_bad_arguments():
    v = np.eye(2, dtype=np.float32)
    with pytest.raises(UsageError, match="percentile"):
        find_sparse_rows(v, percentile=0.0)
    with pytest.raises(UsageError, match="distance_weight"):
        cosmix_scores([0.1], [0.2], -1.0)
    with pytest.raises(UsageError, match="neighbour similarities"):
        cosmix_scores([0.1, 0.2], [0.2], 0.5)
