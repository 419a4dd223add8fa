"""Relevant segment extraction (tools.segments): exact DP vs brute force, values, presets, relevance maps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.segments import (
    PRESETS,
    RSEPreset,
    best_segments,
    beta_transform,
    chunk_values,
    preset_params,
    relevance_from_calibration,
    relevance_from_cosine,
)


def admissible(values, max_length, splits, taken, room):
    """Every (value, start, end) segment that fits, found by enumeration."""
    n = len(values)
    out = []
    for s in range(n):
        for e in range(s + 1, n + 1):
            if e - s > min(max_length, room) or any(s < p < e for p in splits):
                continue
            if any(s < b and a < e for a, b in taken):
                continue
            out.append((float(sum(values[s:e])), s, e))
    return out


def brute_force(values, max_length, overall_max_length, minimum_value, splits=()):
    """The repeated constrained maximum-sum subarray, each round by exhaustive enumeration."""
    taken, total = [], 0
    while total < overall_max_length:
        cands = admissible(values, max_length, splits, taken, overall_max_length - total)
        if not cands:
            break
        best = max(v for v, _, _ in cands)
        if best < minimum_value:
            break
        taken.append(min(((s, e) for v, s, e in cands if v >= best - 1e-9)))
        total += taken[-1][1] - taken[-1][0]
    return sorted(taken)


@pytest.mark.parametrize("seed", range(60))
def test_segments_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    values = list(np.round(rng.normal(0.0, 1.0, n), 3))
    max_length, overall = int(rng.integers(1, 6)), int(rng.integers(1, 12))
    minimum = float(rng.uniform(-0.1, 1.2))
    splits = sorted({int(x) for x in rng.integers(1, n + 1, 2)}) if n > 2 else []
    got = best_segments(values, max_length, overall, minimum, splits)
    assert [(s.start, s.end) for s in got] == brute_force(values, max_length, overall, minimum, splits)
    assert sum(s.end - s.start for s in got) <= overall
    for s in got:
        assert s.end - s.start <= max_length and s.value >= minimum - 1e-12
        assert s.value == pytest.approx(sum(values[s.start : s.end]))


def test_first_segment_is_the_maximum_sum_subarray():
    rng = np.random.default_rng(99)
    for _ in range(50):
        values = list(rng.normal(0, 1, 9))
        got = best_segments(values, 4, 100, -100.0)
        first = max(got, key=lambda s: s.value)
        assert first.value == pytest.approx(max(v for v, _, _ in admissible(values, 4, (), [], 100)))


def test_sandwiched_chunk_is_included():
    # the best single segment spans the irrelevant middle chunk (dsRAG keeps it whole)
    got = best_segments([0.6, -0.18, 0.6], max_length=5, overall_max_length=10, minimum_value=0.5)
    assert [(s.start, s.end) for s in got] == [(0, 3)]
    # a document boundary between them forbids the bridge
    got = best_segments([0.6, -0.18, 0.6], max_length=5, overall_max_length=10, minimum_value=0.5, splits=[2])
    assert [(s.start, s.end) for s in got] == [(0, 1), (2, 3)]


def test_minimum_value_and_overall_length():
    assert best_segments([0.3, -0.2, 0.3], 3, 10, minimum_value=0.5) == []
    got = best_segments([0.9, -1.0, 0.8, 0.7], 2, overall_max_length=2, minimum_value=0.1)
    assert [(s.start, s.end) for s in got] == [(2, 4)]
    got = best_segments([0.9, -1.0, 0.8, 0.7], 2, overall_max_length=3, minimum_value=0.1)
    assert [(s.start, s.end) for s in got] == [(0, 1), (2, 4)]


def test_chunk_value_formula():
    p = preset_params("balanced")
    v = chunk_values([1.0, 0.5, 0.0], [0, 3, 0], p)
    assert np.allclose(v, [1.0 - 0.18, math.exp(-3 / 30) * 0.5 - 0.18, -0.18])


def test_presets_and_overrides():
    assert set(PRESETS) == set(RSEPreset)
    assert preset_params("find_all").overall_max_length == 200
    p = preset_params(RSEPreset.PRECISION, max_length=4, minimum_value=None)
    assert p.max_length == 4 and p.minimum_value == PRESETS[RSEPreset.PRECISION].minimum_value
    with pytest.raises(UsageError, match="balanced"):
        preset_params("greedy")
    with pytest.raises(UsageError, match="decay_rate"):
        preset_params("balanced", decay_rate=0)


def test_relevance_maps():
    assert np.allclose(beta_transform([0.0, 0.5, 1.0]), [0.0, 0.5, 1.0])
    assert beta_transform(0.1) > 0.1 and beta_transform(0.9) < 0.9  # spread towards the ends
    r = relevance_from_cosine([0.05, 0.4, 0.8], low=0.1, high=0.7)
    assert r[0] == 0.0 and r[2] == 1.0 and r[1] == pytest.approx(0.5)
    pos = [0.3, 0.5, 0.7, 0.9]
    assert list(relevance_from_calibration([0.2, 0.5, 0.95], pos)) == [0.0, 0.5, 1.0]
    with pytest.raises(UsageError):
        relevance_from_calibration([0.5], [])
