"""Fusion functions against hand-computed values."""

import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.query.fusion import minmax_normalise, rrf, weighted_fusion


def test_rrf_matches_hand_computation():
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [d for d, _ in rrf([["a", "b", "c"], ["c", "a"]], k=60)] == ["a", "c", "b"]


def test_rrf_weights_change_the_order():
    lists = [["x", "y"], ["y", "x"]]
    # equal weights: x and y tie exactly (1/61 + 1/62 each); tie broken by first appearance
    tied = rrf(lists, k=1)
    assert tied[0][1] == pytest.approx(tied[1][1])
    assert [d for d, _ in rrf(lists, k=1, weights=[1.0, 3.0])] == ["y", "x"]
    assert dict(rrf(lists, k=1, weights=[1.0, 3.0]))["y"] == pytest.approx(1 / 3 + 3 / 2)
    assert [d for d, _ in rrf(lists, k=1, weights=[3.0, 1.0])] == ["x", "y"]


def test_rrf_zero_weight_list_contributes_nothing():
    fused = dict(rrf([["a"], ["b", "a"]], k=10, weights=[0.0, 1.0]))
    assert fused["a"] == pytest.approx(1 / 12)
    assert fused["b"] == pytest.approx(1 / 11)


def test_minmax():
    assert minmax_normalise([2.0, 4.0, 3.0]) == pytest.approx([0.0, 1.0, 0.5])
    assert minmax_normalise([5.0, 5.0]) == [1.0, 1.0]
    assert minmax_normalise([]) == []


def test_weighted_fusion_hand_computed_and_missing_docs():
    bm25 = {"a": 10.0, "b": 6.0, "c": 2.0}  # -> 1, .5, 0
    dense = {"c": 0.9, "d": 0.5, "a": 0.1}  # -> 1, .5, 0
    fused = dict(weighted_fusion([bm25, dense], [1.0, 1.0]))
    assert fused == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.25})
    fused = weighted_fusion([bm25, dense], [1.0, 3.0])
    assert dict(fused) == pytest.approx({"a": 0.25, "b": 0.125, "c": 0.75, "d": 0.375})
    assert [d for d, _ in fused] == ["c", "d", "a", "b"]
    assert dict(weighted_fusion([bm25, dense], [3.0, 1.0])) == pytest.approx({"a": 0.75, "b": 0.375, "c": 0.25, "d": 0.125})
    assert [d for d, _ in weighted_fusion([bm25, dense], [3.0, 1.0])] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("weights", [[0.0, 0.0], [-1.0, 1.0], [1.0]])
def test_bad_weights_refused(weights):
    with pytest.raises(UsageError):
        rrf([["a"], ["b"]], weights=weights)
    with pytest.raises(UsageError):
        weighted_fusion([{"a": 1.0}, {"b": 1.0}], weights)
