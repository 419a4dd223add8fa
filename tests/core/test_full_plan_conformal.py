"""The conformal step on hand-built states (CONFLARE): the cutoff, the budget, the judge's rule, the corpus cap,
and coverage measured against the cutoff computed by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ragsieve.agent.core.state import CoverageLoss, JudgeRoundReport
from ragsieve.agent.plan.plans import STEPS
from ragsieve.tools.filters.conformal import ScoreKind, hybrid_signal, nonconformity
from tests.core.test_calibration import FACTS, TinyIndex, bow
from tests.core.test_full_plan import calibrate, hits_for, make, run_step


def plant_threshold(root, kind: str, qhat: float) -> None:
    saved = json.loads((root / "calibration.json").read_text())
    saved["qhat"][kind] = qhat
    (root / "calibration.json").write_text(json.dumps(saved))


def test_conformal_without_calibration_passes_through(tmp_path):
    state, deps = make(TinyIndex(tmp_path, FACTS), "beta bridge toll")
    before = [h.chunk_id for h in state.context]
    summary = run_step("conformal", state, deps)
    assert summary["status"] == "uncalibrated" and "ragsieve calibrate" in summary["note"]
    assert [h.chunk_id for h in state.context] == before and state.conformal is None


@pytest.mark.parametrize("kind", [k.value for k in ScoreKind])
def test_conformal_keeps_exactly_the_chunks_under_the_threshold(tmp_path, kind):
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    state, deps = make(index, "beta bridge toll coins", context_rows=range(6), conformal={"score_kind": kind})
    summary = run_step("conformal", state, deps)
    qhat = cal.threshold(ScoreKind(kind))
    signal = index.vectors.astype(float) @ bow(state.question)
    if ScoreKind(kind).hybrid:  # RRF of the dense and BM25 rankings over the whole index
        signal = hybrid_signal(signal, index.bm25.scores(state.question), cal.hybrid_k)
    order = list(np.argsort(-signal, kind="stable"))
    expected = [
        h.chunk_id
        for h in sorted(hits_for(index, state.question), key=lambda h: -signal[h.row])
        if nonconformity(ScoreKind(kind), signal[h.row], signal.max(), order.index(h.row) + 1) <= qhat
    ]
    assert summary["status"] == "applied" and summary["kind"] == kind
    # CONFLARE: every pool chunk passing the cutoff, of whatever size, best signal first; nothing else
    assert summary["kept"] == expected == summary["passing"]
    assert set(summary["kept"]) | set(summary["removed"]) == {h.chunk_id for h in hits_for(index, state.question)}
    assert [h.chunk_id for h in state.context] == summary["kept"]
    assert state.evidence == ("strong" if expected else "none")
    assert state.conformal.coverage == pytest.approx(1 - cal.alpha)


def test_conformal_alpha_override_recomputes_the_threshold(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "rank", "alpha": 0.6})
    summary = run_step("conformal", state, deps)
    assert summary["alpha"] == 0.6 and state.conformal.coverage == pytest.approx(0.4)
    expected = cal.threshold(ScoreKind.RANK, 0.6)
    assert (summary["qhat"] is None and math.isinf(expected)) or summary["qhat"] == pytest.approx(expected)


def test_conformal_keeps_every_passing_pool_chunk_up_to_the_token_budget(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = 2.0  # every cosine >= -1 passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    state, deps = make(index, "beta bridge toll", context_rows=range(2), conformal={"score_kind": "raw"})
    summary = run_step("conformal", state, deps)
    everything = [h.chunk_id for h in hits_for(index, state.question)]
    assert summary["kept"] == everything and summary["over_budget"] == []  # not the 2-chunk context: the pool
    assert "budget_note" not in summary and not state.notes
    state, deps = make(
        index, "beta bridge toll", context_rows=range(2), conformal={"score_kind": "raw"}, loop={"context_tokens": 40}
    )
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == everything[: len(summary["kept"])] and len(summary["kept"]) < len(everything)
    assert summary["over_budget"] == everything[len(summary["kept"]) :]
    cut = len(everything) - len(summary["kept"])
    assert f"{cut} passing chunks were left out" in summary["budget_note"] and summary["budget_note"] in state.notes


def test_conformal_adds_the_trusted_relevant_set_under_union(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = -2.0  # nothing passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    for rule, expected in (("union", ["gamma.md#1"]), ("relevant", ["gamma.md#1"])):
        state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"}, loop={"combine": rule})
        state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
        state.loop.trusted.update({"gamma.md#1": True, "beta.md#1": False})
        summary = run_step("conformal", state, deps)
        assert summary["kept"] == expected and state.evidence == "judged"
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"})
    summary = run_step("conformal", state, deps)  # no judge, nothing passes: no evidence at all
    assert summary["kept"] == [] and state.evidence == "none"


@pytest.mark.parametrize("combine", ["union", "auto"])
def test_with_no_trusted_judge_the_conformal_set_joins_the_fast_context_never_replaces_it(tmp_path, combine):
    """Planted: the fast context holds a chunk the conformal cutoff rejects (the weakest pool chunk). With the
    judge distrusted the step keeps it beside the passing set: the stage never holds less than the one before."""
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    question = "beta bridge toll coins"
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    passing = run_step("conformal", state, deps)["passing"]
    weakest = hits_for(index, question)[-1].chunk_id
    assert passing and weakest not in passing
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    state.first_stage = [weakest, passing[0]]
    state.context = [state.pool[c] for c in state.first_stage]
    state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
    state.loop.trusted.update({weakest: True})
    state.loop.distrusted = "round 1: called a decoy relevant"
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == [weakest] + passing and summary["removed"] == []
    assert summary["combined_with"] == "conformal set + fast context (no trusted judge)"
    assert state.evidence == "strong"
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["rank"] = -1.0  # nothing passes: the fast context stays, marked as such, and the model is asked
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    state.first_stage = [weakest]
    state.context = [state.pool[weakest]]
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == [weakest] and state.evidence == "fast"


def test_conformal_warns_when_corpus_changed(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    index.manifest["corpus_fingerprint"] = "fp-other"
    state, deps = make(index, "beta bridge toll")
    summary = run_step("conformal", state, deps)
    assert "corpus changed" in summary["warnings"][0]


def test_conformal_corpus_candidates_admit_passing_chunks_beyond_the_pool(tmp_path):
    """`candidates = "corpus"` is CONFLARE's threshold retrieval: a chunk that passes the cutoff is kept even
    when the first stage did not put it in the pool; `pool` keeps only pool chunks."""
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = 2.0  # every chunk passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    everything = [h.chunk_id for h in hits_for(index, "beta bridge toll")]
    for mode, expected in (("pool", set(everything[:2])), ("corpus", set(everything))):
        state, deps = make(
            index,
            "beta bridge toll",
            context_rows=[],
            conformal={"score_kind": "raw", "candidates": mode},
            loop={"combine": "relevant"},
        )
        for cid in everything[2:]:  # the first stage found only the best two
            del state.pool[cid]
        summary = run_step("conformal", state, deps)
        assert set(summary["kept"]) == expected
        assert set(state.pool) >= expected  # corpus chunks join the pool the later stages work from


def test_conformal_refuses_a_hybrid_kind_on_a_calibration_without_hybrid_scores(tmp_path):
    from ragsieve.agent.errors import UsageError

    index = TinyIndex(tmp_path, FACTS, bm25=False)
    calibrate(index)  # a calibration as older versions wrote it: dense kinds only
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "hybrid-ratio"})
    with pytest.raises(UsageError, match="calibrate again"):
        STEPS["conformal"]().run(state, deps)


def test_a_binding_corpus_cap_is_reported_and_the_coverage_stated_as_reduced(tmp_path):
    """Threshold retrieval over the index stops at `corpus_max`: when the best chunk past the cap passes the
    cutoff too, the conformal set was truncated, and the trace, the notes and the record say so."""
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    question = "beta bridge toll"
    sims = np.sort(index.vectors.astype(float) @ bow(question))[::-1]
    assert sims[1] > sims[2]  # the 2nd and 3rd chunks are told apart by the cutoff below
    everything = [h.chunk_id for h in hits_for(index, question)]
    cases = (
        (2.0, 2, True),  # every chunk passes; 2 admitted beyond the pool's 1: the 3rd passes too
        (2.0, len(everything), False),  # the cap holds every chunk
        (1 - (sims[1] + sims[2]) / 2, 2, False),
    )  # the cap binds nothing: the chunk past it fails the cutoff
    for qhat, cap, binds in cases:
        plant_threshold(tmp_path, "raw", qhat)
        state, deps = make(index, question, context_rows=[], conformal={"score_kind": "raw", "corpus_max": cap})
        for cid in everything[1:]:  # the first stage found only the best chunk
            del state.pool[cid]
        summary = run_step("conformal", state, deps)
        record = state.conformal
        assert record is not None and record.guaranteed is (not binds) and summary["coverage_guaranteed"] is (not binds)
        if binds:
            assert record.reduced == [CoverageLoss.CORPUS_CAP] and record.corpus_cap == cap
            assert summary["corpus_cap"]["bound"] and summary["corpus_cap"]["note"] in state.notes
            assert "not guaranteed" in summary["corpus_cap"]["note"]
            assert summary["passing"] == everything[:2]
        else:
            assert record.reduced == [] and record.corpus_cap is None and "corpus_cap" not in summary
            assert not any("corpus_max" in n for n in state.notes)


def test_a_budget_cut_marks_the_coverage_as_reduced(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    plant_threshold(tmp_path, "raw", 2.0)
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"}, loop={"context_tokens": 40})
    summary = run_step("conformal", state, deps)
    assert summary["over_budget"] and state.conformal.reduced == [CoverageLoss.BUDGET]
    assert summary["coverage_guaranteed"] is False


@pytest.mark.parametrize("combine", ["relevant", "union", "auto"])
def test_measured_coverage_under_a_misleading_trusted_judge_is_the_hand_computed_cutoffs(tmp_path, combine):
    """Every question asks for one chunk; a trusted judge calls a *wrong* chunk relevant and the gold one not.
    Under every rule the context keeps the gold chunk exactly when the cutoff, computed here by hand from the
    index vectors (raw score 1 - cosine <= qhat), keeps it: the coverage measured over the questions is the
    conformal set's, whatever the judge says (issue 46: `relevant` used to drop the conformal set)."""
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    qhat = cal.threshold(ScoreKind.RAW)
    kept, expected = [], []
    for row in range(index.store.count()):
        gold = index.store.get(row)
        question = " ".join(gold.text.split()[:7])
        state, deps = make(index, question, conformal={"score_kind": "raw"}, loop={"combine": combine})
        wrong = next(h.chunk_id for h in reversed(list(state.pool.values())) if h.chunk.doc_id != gold.doc_id)
        state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
        state.loop.trusted.update({wrong: True, gold.chunk_id: False})
        summary = run_step("conformal", state, deps)
        kept.append(gold.chunk_id in summary["kept"])
        expected.append(bool(1 - float(index.vectors[row].astype(float) @ bow(question)) <= qhat))
    assert any(expected) and kept == expected
    assert np.mean(kept) == pytest.approx(np.mean(expected))
