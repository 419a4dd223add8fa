"""Stage contracts of the card's pipeline with a scripted LLM: abstention decided with evidence,
the final answer validated, the relevant set passed through, RSE and calibration as their methods."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsieve.agent.answer.answering import (
    ABSTAIN,
    CLOSEST_INTRO,
    NO_EVIDENCE,
    PASSAGES_INTRO,
    answers_and_abstains,
    is_abstention,
)
from ragsieve.agent.calibration.questions import calibration_warnings, needed_calibration_questions
from ragsieve.agent.core.state import JudgeRoundReport, RunState
from ragsieve.agent.plan.plans import STEPS
from ragsieve.testing import FakeChat
from ragsieve.tools.filters.segments import adjust_for_chunk_length, best_segments, preset_params
from ragsieve.tools.metrics import is_abstention as counted_as_abstention
from tests.support.loop_fakes import CHAIN, Script, chain_judge, make_deps, run, steps


def _state_with_context(deps, question, ids):
    state = RunState(question=question, plan="t")
    hits = deps.retriever.run(question, top_k=20)
    state.remember(hits)
    state.context = [h for h in hits if h.chunk_id in ids]
    return state


def test_empty_context_says_there_is_no_evidence_without_asking_the_model():
    chat = FakeChat()  # any model call would fail: nothing is scripted
    deps = make_deps(CHAIN, chat)
    state = RunState(question="Where was the alpha project leader born?", plan="t")
    result = STEPS["answer"]().run(state, deps)
    assert state.answer == NO_EVIDENCE and state.citations == [] and state.abstention == "no_evidence"
    assert result.summary["llm"] is False and chat.history == []


def test_a_non_empty_conformal_set_does_not_overrule_a_model_abstention():
    """CONFLARE's set is never empty: "strong" evidence says nothing about answerability. Without an
    abstention calibration the model's abstention stands, with the closest passages marked as not an answer."""
    deps = make_deps(CHAIN, FakeChat(default=ABSTAIN))
    state = _state_with_context(deps, "alpha project leader", {"a#0", "n2#0"})
    state.evidence = "strong"  # a chunk passed the calibrated cutoff
    result = STEPS["answer"]().run(state, deps)
    assert state.abstention == "model" and state.answer.startswith(ABSTAIN) and CLOSEST_INTRO in state.answer
    assert counted_as_abstention(state.answer) and not state.answer.startswith(PASSAGES_INTRO)
    assert [c.chunk_id for c in state.citations] == [h.chunk_id for h in state.context]
    assert "[1]" in state.answer and "[2]" in state.answer and not state.citations_inferred
    assert result.summary["answerability"]["answerable"] is None


def test_a_model_abstaining_keeps_its_abstention_listing_the_closest_passages():
    deps = make_deps(CHAIN, FakeChat(default="the context does not contain the answer"))
    deps.config.abstention = deps.config.abstention.model_copy(update={"passages": 0})
    state = _state_with_context(deps, "alpha project leader", {"a#0"})
    STEPS["answer"]().run(state, deps)
    assert state.abstention == "model" and state.citations == [] and not state.citations_inferred
    assert state.answer == ABSTAIN


def test_an_answer_that_also_abstains_is_caught_before_validation():
    mixed = "The leader is bravo person [1]. The context does not contain the answer."
    assert answers_and_abstains(mixed) and not is_abstention(mixed)
    assert is_abstention(" the CONTEXT does not contain the answer ") and not answers_and_abstains(ABSTAIN)
    chat = FakeChat([mixed])
    deps = make_deps(CHAIN, chat)
    state = _state_with_context(deps, "alpha project leader", {"a#0"})
    STEPS["answer"]().run(state, deps)
    assert state.abstention == "mixed"
    result = STEPS["validate"]().run(state, deps)  # deterministic: no validation call
    assert result.outcome == "unresolved" and "deterministic" in result.summary["reason"]
    assert len(chat.history) == 1


def test_the_final_answer_is_what_is_validated_and_resolved_describes_it():
    script = Script(judge=chain_judge, validate=[False, True], answer="Born in charlie town [1].")
    deps = make_deps(CHAIN, FakeChat(default=script), candidates=2, max_iterations=1, neighbours=False)
    state = run(deps, "Where was the alpha project leader born?")
    names = [s for s, _ in steps(state)]
    if steps(state)[-1] == ("fallback", "unchanged"):  # nothing added: the answer validated last stands (issue 56)
        names = names[:-1]
    assert names[-2:] == ["answer", "validate"]  # the plan ends on the validation of the answer it returns
    validations = [e for e in state.trace if e.step == "validate"]
    assert all(v.summary["validated"] == "answer" for v in validations)
    assert state.resolved is validations[-1].summary["resolved"]
    assert names.index("answer") < names.index("validate")  # never validated before the answer is written


def test_a_trusted_relevant_set_passes_through_whatever_its_size():
    script = Script(judge=lambda q, t: not t.startswith("unrelated") and not t.startswith("weather"))
    deps = make_deps(
        CHAIN, FakeChat(default=script), candidates=6, max_iterations=1, neighbours=False, uninformative_min_n=10, judge_decoys=0
    )
    state = run(deps, "alpha bravo charlie")
    assert state.loop.distrusted is None
    relevant = {c for c, v in state.loop.trusted.items() if v}
    assert {h.chunk_id for h in state.context} == relevant and len(relevant) == 4


@pytest.mark.parametrize("combine", ["union", "relevant"])
def test_union_keeps_the_fast_context_a_noisy_judge_dropped(combine):
    """Planted: the judge calls the fast top-1 (the answer's first hop) irrelevant. Under `union` (an unmeasured
    judge) the converged context keeps it beside the relevant set; only `relevant` (a judge measured to be
    trusted) narrows to the relevant set."""
    script = Script(judge=lambda q, t: t.startswith(("bravo person", "charlie town")))
    deps = make_deps(
        CHAIN,
        FakeChat(default=script),
        candidates=6,
        max_iterations=1,
        neighbours=False,
        final_k=1,
        uninformative_min_n=10,
        judge_decoys=0,
        combine=combine,
    )
    state = run(deps, "alpha project leader bravo person born")
    assert state.first_stage[0] == "a#0" and state.loop.trusted == {"a#0": False, "b#0": True, "n2#0": False}
    context = [h.chunk_id for h in state.context]
    assert context == (["a#0", "b#0"] if combine == "union" else ["b#0"])


def test_an_untrusted_judge_decides_nothing_the_fast_context_stays():
    deps = make_deps(
        CHAIN, FakeChat(default=Script(judge=lambda q, t: True)), candidates=6, final_k=2, uninformative_min_n=4, neighbours=False
    )
    state = run(deps, "alpha bravo charlie")
    assert state.loop.distrusted
    assert [h.chunk_id for h in state.context][:2] == state.first_stage[:2]


def test_rse_presets_change_what_is_extracted():
    """Planted values: each preset's length caps and minimum value decide the segments (dsRAG's presets)."""

    def spans(values, preset):
        p = preset_params(preset)
        return [(s.start, s.end) for s in best_segments(values, p.max_length, p.overall_max_length, p.minimum_value)]

    run = [-0.2] * 5 + [0.5] * 25 + [-0.2] * 5  # 25 relevant chunks in a row
    assert spans(run, "default") == [(5, 25), (25, 30)]  # max_length 20 splits the run
    assert spans(run, "find_all") == [(5, 30)]  # max_length 40: one segment
    lone = [-0.2] * 3 + [0.6] + [-0.2] * 3  # one chunk worth 0.6
    assert spans(lone, "balanced") == [(3, 4)]  # minimum_value 0.5
    assert spans(lone, "precision") == [] and spans(lone, "default") == []  # minimum_value 0.7
    assert preset_params("precision", max_length=5).max_length == 5


def test_chunk_length_adjustment_scales_long_chunks_only():
    values = adjust_for_chunk_length([0.5, 0.5, -0.2], [350, 1400, 2100])
    assert np.allclose(values, [0.5, 1.0, -0.6])


def test_rse_values_every_pool_chunk_of_the_candidate_documents():
    import tempfile
    from pathlib import Path

    from tests.core.test_full_plan import FACTS, TinyIndex, make, run_step  # noqa: F401  (shared tiny index)

    with tempfile.TemporaryDirectory() as tmp:
        index = TinyIndex(Path(tmp), FACTS)
        state, deps = make(index, "beta bridge toll coins", context_rows=[3])  # one context chunk
        summary = run_step("segments", state, deps)
        valued = set(summary["values"])
        assert {"beta.md#0", "beta.md#1"} <= valued  # the other pool chunk of the same document is valued too
        assert not {c for c in valued if not c.startswith("beta.md")}  # only candidate documents


def test_calibration_warns_on_too_few_questions_and_on_an_infinite_threshold():
    assert needed_calibration_questions(0.1) == 9 and needed_calibration_questions(0.05) == 19
    assert needed_calibration_questions(0.2) == 4
    warnings = calibration_warnings(3, 0.1, math.inf)
    assert any("at least 9" in w for w in warnings) and any("+inf" in w for w in warnings)
    assert calibration_warnings(50, 0.1, 0.3) == []


@pytest.mark.parametrize("rule", ["auto", "relevant", "union", "anchored"])
def test_context_rules_are_a_mode_with_valid_values(rule):
    from ragsieve.agent.config import LoopConfig
    from ragsieve.agent.errors import UsageError

    assert LoopConfig(combine=rule).combine == rule
    with pytest.raises((UsageError, ValueError), match="relevant"):
        LoopConfig(combine="judge-first")


def test_judge_round_records_are_typed():
    report = JudgeRoundReport(round=1, judged=2, mode="judge", reason="")
    assert report.model_dump()["new_relevant"] == []
