"""The `agentic` plan end to end on the real embedded llama.cpp server (slow: run with -m llm)."""

from __future__ import annotations

import pytest

from ragsieve.agent.config import Config
from ragsieve.agent.core.step import END
from ragsieve.agent.plan.plans import BUILTIN_PLANS

pytestmark = pytest.mark.llm

QUESTION = "How do I rotate the API key of a Lumen workspace, and what happens to the old key?"


def test_agentic_plan_end_to_end(examples_index, local_llm):
    from ragsieve.agent.llm.client import LLM
    from ragsieve.agent.llm.openai_chat import OpenAIChat
    from ragsieve.agent.orchestrator import Orchestrator

    # the same embedded server, with a client that waits longer than the default 120 s: on a busy
    # 2-core machine one answer of the 0.5B model can take minutes
    chat = OpenAIChat(local_llm.chat.base_url, "not-needed", None, timeout_s=900, max_retry_s=900)
    llm = LLM(chat, max_tokens=256)
    # a light loop so the 0.5B model on a busy 2-core machine stays inside the client's timeout
    config = Config()
    config.retrieval = config.retrieval.model_validate({**config.retrieval.model_dump(), "pool": 4})
    config.loop = config.loop.model_validate(
        {**config.loop.model_dump(), "judge_chunk_chars": 500, "judge_decoys": 2, "judge_concurrency": 1, "max_iterations": 2}
    )
    with Orchestrator.open(examples_index, config, llm=llm) as orch:
        result = orch.ask(QUESTION, plan="agentic")

    steps = [e.step for e in result.trace]
    # the visited steps follow the plan's transitions, start to end
    plan = BUILTIN_PLANS["agentic"]
    # the final answer is the one validated: the run ends at `validate` (resolved, or exhausted after a fallback),
    # or at a fallback that added nothing right after the validation of the answer it returns (issue 56)
    ended = steps[-1] == "validate" or (steps[-2:] == ["validate", "fallback"] and result.trace[-1].outcome == "unchanged")
    assert steps[0] == plan.start and ended, [(e.step, e.outcome) for e in result.trace]
    for event, nxt in zip(result.trace, steps[1:] + [END]):
        assert plan.transitions[event.step][event.outcome] == nxt
    assert steps[:2] == ["retrieve", "judge"] and "answer" in steps and "validate" in steps
    assert steps.count("judge") <= config.loop.max_iterations  # the loop is bounded
    loop = result.loop
    assert loop.stop_reason  # the reason the loop stopped is recorded
    # the first round judged exactly the retrieved pool: every one of its chunks once, plus at most the decoys
    pool = result.first_stage[: config.retrieval.pool]
    first = loop.rounds[0]
    assert first.judged == len(pool)
    assert len(pool) <= sum(b.get("size", 0) for b in first.batches) <= len(pool) + config.loop.judge_decoys
    # each round's new relevant chunks are exactly what its trusted verdicts said, or (no verdict) the retrieval
    # score (the fast context), less the chunks already relevant: counted once, so the totals follow
    top = set(result.first_stage[: config.loop.final_k])
    seen: list[str] = []
    for report in loop.rounds:
        said = set(report.raw_true) if report.mode == "judge" else set()
        assert set(report.new_relevant) == (said | (set(report.decided_by_score) & top)) - set(seen), report
        seen += report.new_relevant
        assert report.relevant_total == len(seen)
    if any(r.mode == "score" for r in loop.rounds):  # a judge distrusted in the loop decides nothing: the fast
        fast = [c for c in result.first_stage[: config.retrieval.top_k] if c in pool]  # context (the pool's part),
        assert [h.chunk_id for h in result.context][: len(fast)] == fast  # then at most the fallback's chunks
    # the context: the loop's selection (plus at most the fallback's additions)
    ids = [h.chunk_id for h in result.context]
    assert 1 <= len(ids) <= config.retrieval.pool + config.fallback.max_added
    assert any("api-keys" in i or "keys.py" in i for i in ids)
    # a real answer with citations pointing into the context, and metered usage
    assert result.answer.strip()
    assert all(c.chunk_id in ids for c in result.citations)
    assert result.usage.calls >= 3 and result.usage.prompt_tokens > 0
    assert result.usage.calls <= config.loop.max_llm_calls + 10
