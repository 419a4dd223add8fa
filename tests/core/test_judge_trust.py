"""When the judge is no judge: malformed replies, endpoint faults, uninformative or decoy-calling judges."""

from __future__ import annotations

import pytest

from ragsieve.agent.errors import EndpointError
from ragsieve.testing import FakeChat
from tests.support.loop_fakes import CHAIN, Script, chain_judge, decoy_deps, make_deps, run


def test_malformed_judge_json_reasks_once_then_falls_back_to_scores():
    chat = FakeChat(["definitely not json", '{"1": true}'], default=Script())  # 2nd misses key "2"
    deps = make_deps(CHAIN, chat, candidates=2, final_k=1, neighbours=False)
    state = run(deps, "Where was the alpha project leader born?")
    judge = state.trace[1]
    assert judge.step == "judge" and judge.usage.calls == 2
    assert judge.summary.mode == "failed"
    assert "StructuredOutputError" in judge.summary.batches[0]["failed"]
    # the re-ask carried the validation error and the schema
    reask = chat.history[1]["messages"][-1]["content"]
    assert "not valid" in reask and '"1"' in reask
    # score-based decision: the first-stage top final_k chunk is relevant, the other not
    assert state.judged == {state.first_stage[0]: True, state.first_stage[1]: False}
    assert "no usable verdicts" in state.loop.stop_reason
    assert [h.chunk_id for h in state.context] == state.first_stage[:1]
    assert state.answer is not None


def test_endpoint_error_in_one_batch_is_recorded_and_the_rest_is_trusted():
    script = Script(judge=chain_judge)
    chat = FakeChat([EndpointError("down after 5 attempts")], default=script)
    deps = make_deps(
        CHAIN, chat, candidates=4, judge_batch_size=2, final_k=2, neighbours=False, max_iterations=1, uninformative_min_n=10
    )
    state = run(deps, "alpha project leader born bravo")
    report = state.loop.rounds[0]
    assert report.batches[0]["failed"].startswith("EndpointError")
    assert report.mode == "judge" and "decided by retrieval score" in report.reason
    assert set(report.decided_by_score) == set(state.first_stage[:2])


@pytest.mark.parametrize("verdict", [True, False])
def test_uninformative_judge_falls_back_to_the_fast_context(verdict):
    script = Script(judge=lambda q, t: verdict)
    docs = {f"d{i}": [f"alpha topic number{i}"] for i in range(12)}
    deps = make_deps(docs, FakeChat(default=script), candidates=10, final_k=5)
    state = run(deps, "alpha topic?")
    report = state.loop.rounds[0]
    assert report.mode == "score"
    assert report.reason.startswith("all 10")
    assert [h.chunk_id for h in state.context] == state.first_stage[:5]
    assert state.loop.selection["same_as_fast"] is True
    assert state.relevant == state.first_stage[:5]
    assert "no usable verdicts" in state.loop.stop_reason
    assert script.kinds.count("judge") == 1  # one batch of 10 (loop.judge_batch_size 24), no second round


def test_judge_disagreeing_with_retrieval_is_not_trusted():
    docs = {f"d{i}": [" ".join(["alpha"] + [f"w{j}" for j in range(12 - i)]) + f" tag{i}"] for i in range(10)}
    # retriever ranks by overlap: make the question share more words with the low-numbered docs
    question = "alpha " + " ".join(f"w{j}" for j in range(12))
    script = Script(judge=lambda q, t: t.endswith(("tag8", "tag9")))
    deps = make_deps(docs, FakeChat(default=script), candidates=10, final_k=3, judge_batch_size=10)
    state = run(deps, question)
    assert state.first_stage[-2:] == ["d8#0", "d9#0"]
    report = state.loop.rounds[0]
    assert report.mode == "score" and "beyond chance" in report.reason
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]


def test_a_judge_calling_a_decoy_relevant_is_not_trusted():
    # answers "relevant" for the 2nd, 4th... chunk it sees: looks informative, but it hits decoys
    seen = {"n": 0}

    def alternating(q, t):
        seen["n"] += 1
        return seen["n"] % 2 == 0

    deps, script = decoy_deps(alternating)
    state = run(deps, "alpha topic item")
    report = state.loop.rounds[0]
    assert report.decoys == 3 and report.decoys_relevant >= 1
    assert report.mode == "score" and "decoys" in report.reason
    assert "round 1" in state.loop.distrusted
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert not any(cid.startswith("z") for cid in state.judged)  # decoys are never recorded
    assert sum("zebra" in t for t in script.judged_texts) == 3


def test_a_judge_rejecting_decoys_is_trusted_and_decoys_are_shown_once_per_question():
    # anchor_k=0 (the judge-first rule): with final_k=3 the default anchor would keep the fast context
    # combine = relevant (a judge measured to be trusted): under `union` the fast context would stay beside it
    deps, script = decoy_deps(
        lambda q, t: "number5" in t or "number1" in t, candidates=4, expand_k=2, max_iterations=2, anchor_k=0, combine="relevant"
    )
    state = run(deps, "alpha topic item")
    rounds = state.loop.rounds
    assert [r.mode for r in rounds] == ["judge", "judge"]
    assert [(r.decoys, r.decoys_relevant) for r in rounds] == [(3, 0), (0, 0)]  # controls in round 1 only (issue 56)
    assert state.loop.distrusted is None
    assert state.relevant == ["d1#0", "d5#0"]
    assert [h.chunk_id for h in state.context][:2] == ["d1#0", "d5#0"]
    zebras = [t for t in script.judged_texts if "zebra" in t]
    assert len(zebras) == 3 and len(set(zebras)) == 3  # the expansion round of a judge that passed shows none


def test_distrust_in_a_later_round_withdraws_earlier_verdicts():
    # round 1 (4 candidates + 3 decoys): judges well; round 2 (4 expansion candidates, no decoys): says yes to
    # everything, which is no judgment (check (a): all true on >= loop.uninformative_min_n chunks)
    calls = {"n": 0}

    def judge(q, t):
        calls["n"] += 1
        return "number1" in t if calls["n"] <= 7 else True

    deps, script = decoy_deps(judge, candidates=4, expand_k=4, max_iterations=3)
    state = run(deps, "alpha topic item")
    rounds = state.loop.rounds
    assert [r.mode for r in rounds] == ["judge", "score"]
    assert "round 2" in state.loop.distrusted
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert state.loop.selection["same_as_fast"] is True
