"""Check (c): the first round judged again in reversed order; position bias is not relevance."""

from __future__ import annotations

import json
import re

from ragsieve.agent.judging.checks import order_agreement
from ragsieve.testing import FakeChat
from tests.support.loop_fakes import Script, decoy_deps, judge_chunks, run


def positional(script: Script, favoured=("1", "2")):
    """A judge that says "relevant" to whatever sits first in a batch, whatever its text."""

    def reply(messages):
        prompt = messages[0]["content"]
        if "mapping an index to the chunk's text" not in prompt:
            return script(messages)
        script.kinds.append("judge")
        return json.dumps({k: k in favoured for k in judge_chunks(prompt)})

    return reply


def judge_calls(chat: FakeChat) -> int:
    return sum("mapping an index to the chunk's text" in h["messages"][0]["content"] for h in chat.history)


def test_order_agreement_keeps_agreed_verdicts_and_lists_changed_ones():
    agreed, flipped = order_agreement({"a": True, "b": False, "c": True, "d": True}, {"a": True, "b": True, "c": True})
    assert agreed == {"a": True, "c": True} and flipped == ["b"]


def test_a_consistent_judge_passes_and_its_check_rides_with_the_next_round():
    deps, script = decoy_deps(
        lambda q, t: "number1" in t or "number5" in t,
        candidates=4,
        expand_k=2,
        max_iterations=2,
        judge_order_check=True,
        anchor_k=0,
    )
    chat = deps.llm.chat
    state = run(deps, "alpha topic item")
    rounds = state.loop.rounds
    assert [r.mode for r in rounds] == ["judge", "judge"]
    first, second = rounds
    # re-judged: the two called relevant and the rejected one of retrieval's top final_k = 3; the rejected fourth,
    # which retrieval would reject too, cannot change its decision and is not shown again (issue 56)
    assert first.order_check["compared"] == 3 and first.order_check["flipped"] == []
    assert first.order_check["judged_with_round"] == 2
    assert first.decoys == 6 and first.decoys_relevant == 0  # decoys shown in both orders
    assert second.order_check is None and second.decoys == 0  # later rounds: not re-judged, no controls again
    # round 1: 4 candidates + 3 decoys in one batch; round 2: the 3 + 3 re-judged, reversed, ahead of its own
    # candidates in the same batch (issue 56: the check costs no call of its own when the loop goes on)
    assert judge_calls(chat) == 2
    second_prompt = [h for h in chat.history if "mapping an index to the chunk's text" in h["messages"][0]["content"]][1]
    texts = list(judge_chunks(second_prompt["messages"][0]["content"]).values())
    assert sum("zebra" in t for t in texts) == 3 and len(texts) > 6  # the decoys again, and round 2's own chunks
    assert second.judged == len(texts) - 6  # round 2 reports its own chunks only
    assert state.relevant == ["d1#0", "d5#0"]


def test_the_check_goes_alone_when_the_loop_stops_after_round_one():
    # the loop's call budget stops it after round 1: the deferred check is judged alone before the context is made
    deps, _ = decoy_deps(
        lambda q, t: "number1" in t, candidates=4, max_iterations=3, max_llm_calls=1, judge_order_check=True, anchor_k=0
    )
    state = run(deps, "alpha topic item")
    first = state.loop.rounds[0]
    assert len(state.loop.rounds) == 1 and first.order_check["judged_with_round"] is None
    assert first.order_check["compared"] == 3 and first.decoys == 6
    assert judge_calls(deps.llm.chat) == 2 and first.mode == "judge" and state.loop.trusted
    assert "budget" in state.loop.stop_reason
    # nothing relevant in round 1: the loop stops there, and the check runs at once, alone
    deps, _ = decoy_deps(lambda q, t: False, candidates=4, max_iterations=3, judge_order_check=True, anchor_k=0)
    state = run(deps, "alpha topic item")
    assert state.loop.rounds[0].order_check["judged_with_round"] is None and judge_calls(deps.llm.chat) == 2
    # one round only (max_iterations = 1): never deferred, judged alone at once
    deps, _ = decoy_deps(lambda q, t: "number1" in t, candidates=4, max_iterations=1, judge_order_check=True, anchor_k=0)
    state = run(deps, "alpha topic item")
    first = state.loop.rounds[0]
    assert first.order_check["judged_with_round"] is None and first.order_check["compared"] == 3
    assert judge_calls(deps.llm.chat) == 2


def test_a_position_biased_judge_caught_by_the_check_in_round_two_decides_nothing():
    # round 1 finds two relevant chunks (positions 1 and 2), the loop expands; round 2's pass leads with them
    # reversed, where the positional judge picks others: round 1 is distrusted and round 2's own verdicts are not used
    script = Script()
    deps, _ = decoy_deps(None, candidates=6, judge_decoys=0, judge_order_check=True, anchor_k=0, expand_k=2, max_iterations=3)
    deps.llm.chat.default = positional(script)
    state = run(deps, "alpha topic item")
    first, second = state.loop.rounds[:2]
    assert first.order_check["judged_with_round"] == 2 and first.mode == "score"
    assert second.mode == "score" and "first round's order check" in second.reason
    assert state.loop.distrusted.startswith("round 1:") and not state.loop.trusted
    assert len(state.loop.rounds) == 2  # the loop stops: a judge caught once is not asked again
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert set(state.relevant) <= set(state.first_stage[:3])  # every verdict decided by retrieval score


def test_a_position_biased_judge_is_caught_and_the_context_stays_fast():
    script = Script()
    deps, _ = decoy_deps(None, candidates=6, judge_decoys=0, judge_order_check=True, anchor_k=0)
    deps.llm.chat.default = positional(script)
    state = run(deps, "alpha topic item")
    report = state.loop.rounds[0]
    # forward: items 1, 2 relevant; re-judged reversed: those and retrieval's third (final_k = 3), the first two of
    # them now the third and the second: 2 of 3 verdicts changed
    assert report.mode == "score"
    assert "changed 2 of 3 verdicts when the order was reversed" in report.reason
    assert len(report.order_check["flipped"]) == 2
    assert "round 1" in state.loop.distrusted
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert state.loop.selection["same_as_fast"] is True


def test_without_the_check_the_same_biased_judge_is_trusted():
    script = Script()
    deps, _ = decoy_deps(None, candidates=6, judge_decoys=0, judge_order_check=False, anchor_k=0)
    deps.llm.chat.default = positional(script)
    state = run(deps, "alpha topic item")
    assert state.loop.rounds[0].mode == "judge"
    assert state.loop.rounds[0].order_check is None


def test_few_changed_verdicts_are_decided_by_retrieval_score():
    # the reversed pass re-judges the one called relevant and the rejected ones of retrieval's top final_k = 5, and
    # changes one of those 5 verdicts (20 % <= 20 %): that chunk falls back to score, i.e. relevant (in the top 5)
    deps, script = decoy_deps(
        lambda q, t: "number1" in t,
        candidates=8,
        judge_decoys=0,
        judge_batch_size=10,
        judge_order_check=True,
        anchor_k=0,
        final_k=5,
    )
    chat = deps.llm.chat
    changed: list[str] = []

    def second_pass_differs(messages):
        reply = json.loads(script(messages))
        chunks = judge_chunks(messages[0]["content"])
        key, text = next((k, t) for k, t in chunks.items() if "number1" not in t)
        changed.append("d" + re.search(r"number(\d+)", text).group(1) + "#0")
        reply[key] = True
        return json.dumps(reply)

    chat.push(script, second_pass_differs)
    state = run(deps, "alpha topic item")
    report = state.loop.rounds[0]
    assert report.mode == "judge"
    assert report.order_check["compared"] == 5 and report.order_check["flipped"] == changed
    assert changed[0] in report.decided_by_score and changed[0] in state.first_stage[:5]
    assert state.judged[changed[0]] is True
    assert state.judged["d1#0"] is True


def test_a_decoy_called_relevant_in_reversed_order_distrusts_the_judge():
    deps, script = decoy_deps(lambda q, t: "number1" in t, candidates=4, judge_order_check=True)
    chat = deps.llm.chat

    def calls_a_decoy(messages):
        reply = json.loads(script(messages))
        chunks = judge_chunks(messages[0]["content"])
        reply[next(k for k, t in chunks.items() if "zebra" in t)] = True
        return json.dumps(reply)

    chat.push(script, calls_a_decoy)
    state = run(deps, "alpha topic item")
    report = state.loop.rounds[0]
    assert report.mode == "score" and "reversed order" in report.reason and "decoys" in report.reason
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
