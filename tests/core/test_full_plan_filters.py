"""GMM outliers and RSE on hand-built states: a planted outlier flagged as a hand-computed Gaussian says, and
neither stage removing what the conformal step promised to keep (its set, the fast context it joined)."""

from __future__ import annotations

import numpy as np

from ragsieve.agent.core.state import ConformalRecord, CoverageLoss
from tests.core.test_calibration import FACTS, TinyIndex, bow
from tests.core.test_full_plan import calibrate, hits_for, make, run_step


def many_docs():
    topics = {
        "reactor": "reactor salt turbine heat norvik engineers",
        "bridge": "bridge toll coins carts walkers river",
        "garden": "garden tulips frost copper barrels rain",
    }
    docs = {}
    for t, words in topics.items():
        w = words.split()
        docs[f"{t}.md"] = [f"{t} " + " ".join(w[(i + j) % len(w)] for j in range(4)) + f" note {i}" for i in range(6)]
    return docs


# one Gaussian on one feature: its log-likelihood is affine in -(f - mean)^2, so the flagged chunks (below the
# 15th percentile) are computable by hand, independently of sklearn's PCA and mixture code
SINGLE_GAUSSIAN = {
    "enabled": True,
    "method": "weighted_sum",
    "alpha": 0.5,
    "n_components": [1],
    "pca_dims": [1],
    "min_outlier_freq": 1,
    "protect_top": 0,
    "percentile": 15.0,
}
BRIDGE_QUESTION = "bridge toll coins river"


def planted_state(index, **outliers):
    """The six bridge chunks and one planted garden chunk as the context (the GMM's whole fit set)."""
    rows = [h.row for h in hits_for(index, BRIDGE_QUESTION) if h.chunk.doc_id == "bridge.md"]
    planted = next(h for h in hits_for(index, BRIDGE_QUESTION) if h.chunk.doc_id == "garden.md")
    state, deps = make(
        index,
        BRIDGE_QUESTION,
        context_rows=rows + [planted.row],
        outliers={**SINGLE_GAUSSIAN, "fit_candidates": len(rows) + 1, **outliers},
    )
    return state, deps, planted.chunk_id


def hand_flags(index, state) -> set[str]:
    """Eqs. 3-4 with weighted_sum by hand: f = alpha |v - q| + (1 - alpha) |v - c|; flagged below the 15th
    percentile of -(f - mean f)^2."""
    v = np.asarray(index.vectors[[h.row for h in state.context]], dtype=float)
    f = 0.5 * np.linalg.norm(v - bow(state.question), axis=1) + 0.5 * np.linalg.norm(v - v.mean(axis=0), axis=1)
    s = -((f - f.mean()) ** 2)
    return {h.chunk_id for h, x in zip(state.context, s) if x < np.percentile(s, 15.0)}


def test_outliers_remove_the_planted_off_topic_chunk_a_hand_computed_gaussian_flags(tmp_path):
    index = TinyIndex(tmp_path, many_docs())
    state, deps, planted = planted_state(index)
    before = [h.chunk_id for h in state.context]
    assert hand_flags(index, state) == {planted}  # the planted chunk, and no bridge chunk, is in the tail
    summary = run_step("outliers", state, deps)
    assert summary["fit_size"] == 7 and summary["runs_completed"] == 1
    assert summary["removed"] == [planted]
    assert summary["kept"] == [i for i in before if i != planted] == [h.chunk_id for h in state.context]


def test_outliers_never_remove_a_member_of_the_conformal_set(tmp_path):
    """The same planted chunk, now a member of the conformal set: GMM flags it and keeps it (coverage holds)."""
    index = TinyIndex(tmp_path, many_docs())
    state, deps, planted = planted_state(index)
    state.conformal = ConformalRecord(kind="raw", alpha=0.2, qhat=0.9, calibration_n=6, coverage=0.8, passing=[planted])
    summary = run_step("outliers", state, deps)
    assert summary["flag_counts"][planted] == 1 and summary["kept_by_conformal"] == [planted]
    assert summary["removed"] == [] and planted in {h.chunk_id for h in state.context}


def test_every_filter_can_be_switched_off(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    state, deps = make(
        index, "beta bridge toll", conformal={"enabled": False}, outliers={"enabled": False}, segments={"enabled": False}
    )
    before = [h.chunk_id for h in state.context]
    for name in ("conformal", "outliers", "segments"):
        summary = run_step(name, state, deps)
        assert summary["status"] == "disabled" and summary["kept"] == before and summary["removed"] == []
    assert [h.chunk_id for h in state.context] == before


def test_outliers_skip_notes_on_a_tiny_pool(tmp_path):
    state, deps = make(TinyIndex(tmp_path, FACTS), "beta bridge toll", outliers={"enabled": True})
    summary = run_step("outliers", state, deps)
    assert summary["runs_completed"] == 0 and summary["removed"] == []
    assert all(r["skipped"] and "needed" in r["note"] for r in summary["runs"])


def test_outliers_never_remove_the_protected_best_chunks(tmp_path):
    index = TinyIndex(tmp_path, many_docs())
    state, deps = make(
        index,
        "bridge toll coins river",
        context_rows=range(18),
        outliers={"enabled": True, "min_outlier_freq": 1, "protect_top": 4},
    )
    best_four = [h.chunk_id for h in hits_for(index, state.question)][:4]
    summary = run_step("outliers", state, deps)
    assert summary["runs_completed"] == 6
    assert not set(summary["removed"]) & set(best_four)
    assert set(best_four) <= {h.chunk_id for h in state.context}


def test_segments_bridge_a_sandwiched_chunk_and_rebuild_text(tmp_path):
    docs = {
        "guide.md": [
            "rotate the api key in settings",
            "unrelated weather words here",
            "old api key stops working after rotate",
            "cooking pasta recipe",
        ],
        "other.md": ["nothing about keys at all"],
    }
    index = TinyIndex(tmp_path, docs)
    state, deps = make(
        index, "rotate api key old", context_rows=[0, 2], segments={"relevance": "cosine", "cosine_low": 0.0, "cosine_high": 0.5}
    )
    summary = run_step("segments", state, deps)
    assert summary["status"] == "applied" and summary["relevance"] == "cosine"
    seg = summary["segments"][0]
    assert seg["chunk_ids"] == ["guide.md#0", "guide.md#1", "guide.md#2"]  # the middle chunk is sandwiched
    assert summary["added"] == ["guide.md#1"] and summary["removed"] == []
    assert len(state.context) == 1
    merged = state.context[0]
    assert merged.chunk.text == "\n".join(docs["guide.md"][:3]) and merged.chunk.chunk_id == "guide.md#0"


def test_segments_without_a_worthy_segment_leave_the_context(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    state, deps = make(index, "beta bridge toll", segments={"relevance": "cosine", "minimum_value": 5.0})
    before = [h.chunk_id for h in state.context]
    summary = run_step("segments", state, deps)
    assert summary["status"] == "no_segment" and [h.chunk_id for h in state.context] == before


GUIDE = {
    "guide.md": [
        "rotate the api key in settings",
        "unrelated weather words here",
        "old api key stops working after rotate",
        "cooking pasta recipe",
    ],
    "other.md": ["nothing about keys at all"],
}


def guide_state(tmp_path, **segments):
    """guide.md's two relevant chunks and other.md's chunk (no segment is worth it) in the context."""
    index = TinyIndex(tmp_path, GUIDE)
    return make(
        index,
        "rotate api key old",
        context_rows=[0, 2, 4],
        segments={"relevance": "cosine", "cosine_low": 0.0, "cosine_high": 0.5, **segments},
    )


def test_segments_keep_what_the_conformal_step_promised(tmp_path):
    """RSE reshapes the context into segments; other.md#0 lies in none. Unpromised, it goes; as a fast-context
    chunk the conformal step joined (no trusted judge) or as a member of the conformal set, it stays."""
    state, deps = guide_state(tmp_path)
    summary = run_step("segments", state, deps)
    assert summary["removed"] == ["other.md#0"]  # what RSE does to a chunk nobody promised to keep
    for field in ("promised", "passing"):
        state, deps = guide_state(tmp_path)
        state.conformal = ConformalRecord(
            kind="raw", alpha=0.2, qhat=0.9, calibration_n=6, coverage=0.8, **{field: ["other.md#0"]}
        )
        summary = run_step("segments", state, deps)
        assert summary["removed"] == [] and summary["protected"] == ["other.md#0"]
        assert [h.chunk_id for h in state.context][-1] == "other.md#0" and state.conformal.guaranteed


def test_segments_without_keep_evidence_state_the_coverage_as_reduced(tmp_path):
    state, deps = guide_state(tmp_path, keep_evidence=False)
    state.conformal = ConformalRecord(kind="raw", alpha=0.2, qhat=0.9, calibration_n=6, coverage=0.8, passing=["other.md#0"])
    summary = run_step("segments", state, deps)
    assert summary["removed"] == ["other.md#0"] and state.conformal.reduced == [CoverageLoss.SEGMENTS]
    assert summary["coverage_note"] in state.notes and not state.conformal.guaranteed
