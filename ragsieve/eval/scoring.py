"""Scoring one (plan, question) of `ragsieve eval`: the row of metrics and cost, and the optional LLM grade."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from pydantic import BaseModel

from ragsieve.agent.errors import LLMError, StructuredOutputError, UsageError
from ragsieve.agent.llm.deadlines import is_slow_call
from ragsieve.eval.data import Question
from ragsieve.tools import metrics as m
from ragsieve.tools.ingest.chunking import count_tokens

log = logging.getLogger(__name__)


class NoLLM:
    """The chat model of --retrieval-only runs: any LLM call is a bug, and says so."""

    model_name = "none"
    accepts_deadline = False

    def complete(self, messages, **_params):
        raise UsageError("--retrieval-only run attempted an LLM call")


class CountingCache:
    """Wraps the reply cache to total the tokens of cache hits, so a plan served from the
    cache (e.g. by another plan's identical prompt) still shows its real cost."""

    def __init__(self, inner):
        self.inner, self.lock, self.hits = inner, threading.Lock(), [0, 0]

    def get(self, key):
        reply = self.inner.get(key)
        if reply is not None:
            with self.lock:
                self.hits = [self.hits[0] + reply.prompt_tokens, self.hits[1] + reply.completion_tokens]
        return reply

    def put(self, key, reply) -> None:
        self.inner.put(key, reply)

    def take(self) -> list[int]:
        with self.lock:
            hits, self.hits = self.hits, [0, 0]
        return hits


class JudgeVerdict(BaseModel):
    correct: bool
    reason: str


def score_question(orch: Any, plan: str, q: Question, *, retrieval_only: bool, candidate_k: int, judge: bool) -> dict[str, Any]:
    """One (plan, question) row: its answer, retrieval and answer metrics, and cost (`judge`: an LLM grades it)."""
    row: dict[str, Any] = {
        "plan": plan,
        "qid": q.qid,
        "question": q.text,
        "impossible": q.impossible,
        "gold_docs": sorted(m.relevant_set(q.qrels)),
    }
    started = time.perf_counter()
    if retrieval_only:
        docs = m.docs_from_chunks(h.chunk_id for h in orch.retrieve(q.text, top_k=candidate_k))
        row.update({"wall_s": time.perf_counter() - started, "first_stage_top10": docs[:10]})
        return row | m.retrieval_scores(docs, None, q.qrels)
    cache = orch.llm.cache
    if cache is not None and not isinstance(cache, CountingCache):
        cache = orch.llm.cache = CountingCache(cache)  # forks made by ask() share it
    if cache is not None:
        cache.take()
    ans = None
    for attempt in (1, 2):  # a call that was only slow (busy machine) is retried once, then skipped
        try:
            ans = orch.ask(q.text, plan=plan)
            break
        except StructuredOutputError as exc:  # model misbehaviour is a result; transport faults stop the run
            row["error"] = str(exc)
            break
        except LLMError as exc:
            if not is_slow_call(exc):
                raise
            log.warning("question %s: slow LLM call (attempt %d of 2): %s", q.qid, attempt, exc)
            row["error"], row["skipped_slow"] = f"skipped after 2 slow attempts: {exc}", True
    row["wall_s"] = time.perf_counter() - started
    if ans is None:
        return row | {"answer": ""} | (m.answer_scores("", q.answers, q.impossible) if q.answers is not None else {})
    context_docs = m.unique_in_order(h.chunk.doc_id for h in ans.context)
    row.update(
        {
            "answer": ans.answer,
            "resolved": ans.resolved,
            "context": [h.chunk_id for h in ans.context],
            "first_stage_top10": m.docs_from_chunks(ans.first_stage)[:10],
            "context_tokens": sum(count_tokens(h.chunk.text) for h in ans.context),
            "n_context": len(ans.context),
            "steps": [e.step for e in ans.trace],
        }
    )
    hits, u = cache.take() if cache is not None else [0, 0], ans.usage
    row.update(
        {
            "calls": u.calls + u.cached_calls,
            "cached_calls": u.cached_calls,
            "llm_latency_s": u.latency_s,
            "prompt_tokens": u.prompt_tokens + hits[0],
            "completion_tokens": u.completion_tokens + hits[1],
        }
    )
    row.update(m.retrieval_scores(m.docs_from_chunks(ans.first_stage), context_docs, q.qrels))
    row.update(m.answer_scores(ans.answer, q.answers, q.impossible) if q.answers is not None else {})
    if judge and q.answers and not q.impossible:
        row.update(judge_answer(orch, q, ans.answer))
    return row


def judge_answer(orch: Any, q: Question, answer: str) -> dict[str, Any]:
    """The LLM's verdict on `answer` against the gold answers (`judge_answer.j2`), with its own cost."""
    llm, cache = orch.llm.fork(), orch.llm.cache
    if cache is not None:
        cache.take()
    prompt = orch.prompts.render("judge_answer", question=q.text, gold_answers=q.answers, answer=m.strip_citations(answer))
    try:
        verdict = llm.structured([{"role": "user", "content": prompt}], JudgeVerdict)
        out = {"judge_correct": float(verdict.correct), "judge_reason": verdict.reason}
    except StructuredOutputError as exc:
        out = {"judge_correct": None, "judge_reason": f"judge reply invalid: {exc}"}
    used, hits = llm.meter.snapshot(), cache.take() if cache is not None else [0, 0]
    out.update(
        {
            "judge_calls": used.calls + used.cached_calls,
            "judge_tokens": used.prompt_tokens + used.completion_tokens + sum(hits),
        }
    )
    return out
