"""`eval` and `calibrate` survive a call that was only slow: the question is retried once, then skipped and
counted; any other endpoint fault still stops the run (issue 22: a busy machine aborted `calibrate`)."""

from __future__ import annotations

import types

import pytest

from ragsieve.agent.errors import BudgetExceeded, EndpointError
from ragsieve.agent.llm.deadlines import is_slow_call
from ragsieve.eval.data import Question
from ragsieve.eval.scoring import score_question

SLOW = EndpointError(
    "LLM endpoint http://x (model m) failed after 1 attempt(s) in 120.3s; last error: SlowReply: reply not complete after 120s",
    base_url="http://x",
    attempts=1,
)


def test_slow_calls_are_told_from_other_faults():
    assert is_slow_call(SLOW)
    assert is_slow_call(BudgetExceeded("deadline per question reached while streaming"))
    assert not is_slow_call(BudgetExceeded("LLM call budget of 3 per question spent"))
    assert not is_slow_call(
        EndpointError("failed after 5 attempt(s): APIConnectionError: refused", base_url="http://x", attempts=5)
    )


def _score(ask, question):
    """One (plan, question) row of `ragsieve eval` (`scoring.score_question`) over an orchestrator whose ask is `ask`."""
    orch = types.SimpleNamespace(ask=ask, llm=types.SimpleNamespace(cache=None))
    return score_question(orch, "fast", question, retrieval_only=False, candidate_k=100, judge=False)


def test_eval_retries_a_slow_question_once_then_skips_it_with_a_count():
    calls = []

    def ask(text, plan):
        calls.append(text)
        raise SLOW

    row = _score(ask, Question(qid="q1", text="slow one?", answers=["x"]))
    assert len(calls) == 2 and row["skipped_slow"] is True and "skipped after 2 slow attempts" in row["error"]
    assert row["answer"] == ""


def test_eval_still_stops_on_an_endpoint_that_is_down():
    def ask(text, plan):
        raise EndpointError("failed after 5 attempt(s): APIConnectionError: refused", base_url="http://x", attempts=5)

    with pytest.raises(EndpointError):
        _score(ask, Question(qid="q1", text="q?", answers=["x"]))


def test_calibrate_counts_a_slow_contains_judge_and_carries_on():
    from ragsieve.agent.calibration.calibrator import Calibrator
    from ragsieve.agent.calibration.questions import GeneratedQA
    from ragsieve.agent.llm.client import LLM
    from ragsieve.agent.llm.templates import PromptRenderer
    from ragsieve.testing import FakeChat

    chunk = types.SimpleNamespace(text="The old secret stays valid for 24 hours.")
    index = types.SimpleNamespace(store=types.SimpleNamespace(get=lambda row: chunk))
    cal = Calibrator(index, llm=LLM(FakeChat([SLOW])), prompts=PromptRenderer())
    qa = GeneratedQA(question="How long does the old secret stay valid?", answer="24 hours")
    assert cal._contains(qa, 0) is False and cal.counters["judge_errors"] == 1
    down = Calibrator(
        index, llm=LLM(FakeChat([EndpointError("refused", base_url="http://x", attempts=5)])), prompts=PromptRenderer()
    )
    with pytest.raises(EndpointError):
        down._contains(qa, 0)
