"""ragsieve.agent.judging.combine: the score-based decision and the rule that combines verdicts with retrieval."""

from __future__ import annotations

from ragsieve.agent.judging.combine import evidence_keys, score_based_relevant, select_context

FIRST = [f"c{i}" for i in range(10)]


def test_score_based_relevant_is_membership_in_the_fast_top_k():
    assert score_based_relevant(["d", "b", "z"], ["a", "b", "c", "d"], 2) == ["b"]


def test_evidence_keys_order_first_stage_then_discovered_then_neighbours_after_parent():
    keys = evidence_keys(["a", "b"], ["a", "x", "n"], {"n": "b", "m": "zz"})
    assert keys["a"] == 0 and keys["b"] == 1 and keys["x"] == 3  # offset 2 + discovery position 1
    assert 1.5 <= keys["n"] < 2  # right after its parent b
    assert keys["m"] > keys["x"]  # parent unknown: after everything discovered


def test_without_trusted_verdicts_the_context_is_the_fast_context_for_any_rule():
    keys = evidence_keys(FIRST, [], {})
    for anchor, depth in [(0, 0), (3, 0), (5, 0), (3, 8)]:
        chosen, summary = select_context(FIRST, keys, {}, 5, anchor_k=anchor, admit_depth=depth)
        assert chosen == FIRST[:5] and summary["same_as_fast"]


def test_judge_first_rule_promotes_relevant_and_displaces_irrelevant_first():
    keys = evidence_keys(FIRST, ["x1"], {"n1": "c7"})
    trusted = {"c0": True, "c1": False, "c2": True, "c3": True, "c4": True, "c7": True, "n1": True, "c5": False, "x1": False}
    chosen, summary = select_context(FIRST, keys, trusted, 5)
    assert chosen == ["c0", "c2", "c3", "c4", "c7"]  # positives in evidence order
    trusted["c4"] = False
    chosen, summary = select_context(FIRST, keys, trusted, 5)
    assert chosen == ["c0", "c2", "c3", "c7", "n1"]  # the neighbour right after its parent c7
    assert summary["displaced"] == ["c1", "c4"] and summary["promoted"] == ["c7", "n1"]
    # one positive outside the fast top-5 takes the slot of the irrelevant c1; unjudged ones stay
    chosen, _ = select_context(FIRST, keys, {"c6": True, "c1": False}, 5)
    assert chosen == ["c6", "c0", "c2", "c3", "c4"]
    # no positives but an irrelevant verdict: the chunk sinks to the end of the fast context only
    chosen, _ = select_context(FIRST, keys, {"c0": False}, 5)
    assert chosen == ["c1", "c2", "c3", "c4", "c0"]


def test_anchor_keeps_the_retrieval_head_against_a_wrong_judge():
    # the 1.5B failure: top-2 gold called irrelevant, three deeper chunks called relevant
    keys = evidence_keys(FIRST, [], {})
    trusted = {"c0": True, "c1": False, "c2": False, "c3": False, "c4": False, "c5": True, "c6": True, "c7": True}
    judge_first, _ = select_context(FIRST, keys, trusted, 5, anchor_k=0)
    assert judge_first == ["c0", "c5", "c6", "c7", "c1"]  # c2 lost on the judge's word alone
    chosen, summary = select_context(FIRST, keys, trusted, 5, anchor_k=3)
    assert chosen == ["c0", "c1", "c2", "c5", "c6"]
    assert summary["anchored_against_verdict"] == ["c1", "c2"]
    assert summary["displaced"] == ["c3", "c4"] and summary["promoted"] == ["c5", "c6"]
    # the anchor is capped at final_k - 1: the judge always decides one slot
    chosen, summary = select_context(FIRST, keys, trusted, 5, anchor_k=7)
    assert chosen == FIRST[:4] + ["c5"] and summary["displaced"] == ["c4"]
    chosen, _ = select_context(FIRST, keys, {"c0": False, "c3": True}, 1, anchor_k=3)
    assert chosen == ["c3"]


def test_at_most_final_k_minus_anchor_chunks_are_displaced():
    keys = evidence_keys(FIRST, [], {})
    trusted = {c: (i >= 5) for i, c in enumerate(FIRST)}  # the judge wants exactly the other five
    for anchor in range(7):
        chosen, summary = select_context(FIRST, keys, trusted, 5, anchor_k=anchor)
        kept = min(anchor, 4)
        assert len(chosen) == 5 and len(summary["displaced"]) == 5 - kept
        assert chosen[:kept] == FIRST[:kept]


def test_admit_depth_refuses_relevant_chunks_retrieval_finds_implausible():
    keys = evidence_keys(FIRST, ["x1"], {"n1": "c1", "n9": "c9"})
    trusted = {"c4": False, "c8": True, "x1": True, "n1": True, "n9": True}
    chosen, summary = select_context(FIRST, keys, trusted, 5, anchor_k=0, admit_depth=6)
    # n1 sits right after its parent c1 (position 1.5 < 6); c8, x1 and n9 are deeper than 6
    assert chosen == ["n1", "c0", "c1", "c2", "c3"]
    assert summary["refused_too_deep"] == ["c8", "n9", "x1"]
    chosen, summary = select_context(FIRST, keys, trusted, 5, anchor_k=0, admit_depth=0)
    assert summary["refused_too_deep"] == [] and "x1" in chosen
