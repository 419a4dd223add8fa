"""The sparse-information subset against brute-force references."""
import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.sparse import find_sparse_rows, nearest_neighbour_similarity, unique_term_counts


def _normalised(rng, n, d):
    v = rng.normal(size=(n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_nearest_neighbour_matches_brute_force_across_blocks():
    rng = np.random.default_rng(0)
    v = _normalised(rng, 37, 8)
    expected = [max(float(v[i] @ v[j]) for j in range(37) if j != i) for i in range(37)]
    got = nearest_neighbour_similarity(v, block=5)
    assert np.allclose(got, expected, atol=1e-6)


def test_unique_term_counts_by_hand():
    texts = ["alpha beta gamma", "alpha delta 123456", "beta epsilon epsilon zeta"]
    # text0: gamma unique; text1: delta unique (digits ignored); text2: epsilon, zeta unique
    assert unique_term_counts(texts).tolist() == [1, 1, 2]


def test_find_sparse_rows_combines_both_rules():
    v = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    texts = ["shared words here", "shared words here too", "shared words unusual rarities abound"]
    only_neighbour = find_sparse_rows(v, texts, threshold=0.5, rare_terms=0)
    assert only_neighbour.rows == [2] and only_neighbour.by_rare_terms == 0
    both = find_sparse_rows(v, ["aaa", "bbb", "ccc"], threshold=-1.0, rare_terms=1)
    assert both.rows == [0, 1, 2] and both.by_neighbour == 0 and both.by_rare_terms == 3


def test_bad_arguments():
    v = np.eye(2, dtype=np.float32)
    with pytest.raises(UsageError, match="2 vectors but 1 texts"):
        find_sparse_rows(v, ["a"])
    with pytest.raises(UsageError, match="cosine"):
        find_sparse_rows(v, ["a", "b"], threshold=2.0)
