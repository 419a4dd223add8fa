"""One question run in a worker thread, seen from the event loop: its result, or its events as they happen.

The plan runs in a thread (retrieval and the LLM client block); step events
and answer tokens cross to the event loop through `call_soon_threadsafe`. A
client that goes away cancels the question's budget, so the thread stops at
its next LLM call, streamed token or step boundary instead of finishing work
nobody will read.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

import anyio

from ragsieve.agent.errors import BudgetExceeded, LLMError, ModelUnavailableError, RagsieveError, UsageError
from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.service.common import shutdown
from ragsieve.service.common.errors import ApiError

if TYPE_CHECKING:
    from ragsieve.insights.record import Surface
    from ragsieve.service.common.insights_hook import InsightsHook

DISCONNECT_POLL_S = 0.25


@dataclass
class QuestionRequest:
    question: str
    plan: str | None = None
    history: list = field(default_factory=list)
    instructions: str | None = None
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    answer_options: dict[str, Any] = field(default_factory=dict)
    where: Any = None  # a `Where` metadata filter, or None


def question_budget(orch, timeout_s: float) -> QuestionBudget:
    """The question's budget: the config's, with the deadline cut to the server's per-request limit."""
    b = orch.config.budget
    deadline = timeout_s if b.deadline_s is None else min(b.deadline_s, timeout_s)
    return QuestionBudget(deadline, b.llm_calls, b.tokens)


def as_api_error(exc: BaseException) -> ApiError:
    """The HTTP status and message a failed question is reported with."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, UsageError):
        return ApiError(400, str(exc), code="invalid_request")
    if type(exc).__name__ == "PromptTooLarge":  # the request's own text is too long for the model: the caller's
        return ApiError(400, f"the request is too large for the model: {exc}", code="prompt_too_large")
    if isinstance(exc, BudgetExceeded):
        return ApiError(504, f"the question ran out of time or budget: {exc}", code="timeout")
    if isinstance(exc, ModelUnavailableError):
        return ApiError(503, f"the model is unavailable: {exc}", code="model_unavailable")
    if isinstance(exc, LLMError):
        return ApiError(502, f"the upstream LLM failed: {exc}", code="upstream_error")
    if isinstance(exc, RagsieveError):
        return ApiError(500, str(exc), code="internal_error")
    return ApiError(500, f"internal error ({type(exc).__name__}); the server keeps running", code="internal_error")


def check_answered(answer):
    """A plan stopped by its budget before any answer (e.g. the deadline passed in the queue) is a 504."""
    if answer.stopped and not (answer.answer or "").strip():
        raise ApiError(504, f"no answer within the request's limits: {answer.stopped}", code="timeout")
    return answer


@dataclass
class Logged:
    """Where a question goes in the question log (`ragsieve.service.common.insights_hook`)."""

    hook: InsightsHook
    index: str
    surface: Surface


class QuestionJob:
    """`answer_id` names the answer for the question log and the chat page's feedback alike."""

    def __init__(self, orch, request: QuestionRequest, budget: QuestionBudget, logged: Logged | None = None):
        self.orch, self.request, self.budget, self.logged = orch, request, budget, logged
        self.started = time.monotonic()
        self.first_token_s: float | None = None
        self.answer_id = uuid.uuid4().hex

    def _ask(self, on_event=None, on_token=None):
        r = self.request
        answer = self.orch.ask(
            r.question,
            plan=r.plan,
            history=r.history or None,
            instructions=r.instructions,
            overrides=r.overrides or None,
            budget=self.budget,
            on_event=on_event,
            on_token=on_token,
            answer_options=r.answer_options,
            where=r.where,
        )
        if self.logged is not None and not (answer.stopped and not (answer.answer or "").strip()):
            self.logged.hook.asked(
                self.logged.index, self.logged.surface, answer, time.monotonic() - self.started, self.answer_id
            )
        return answer

    async def result(self, limiter, is_disconnected) -> Any:
        """The `Answer`; the question is cancelled when `is_disconnected()` turns true while it runs."""
        task = asyncio.ensure_future(anyio.to_thread.run_sync(self._ask, limiter=limiter))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if not task.done() and await is_disconnected():
                    self.budget.cancel("the client disconnected")
            return check_answered(task.result())
        finally:
            if not task.done():  # cancelled from outside (shutdown): let the thread stop early
                self.budget.cancel("the request was cancelled")

    async def stream(self, limiter) -> AsyncIterator[tuple]:
        """("event", kind, data) and ("token", text) as they happen, then ("done", Answer) or ("error", ApiError).
        Closing the iterator early (client gone) cancels the question."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def on_event(kind: str, data: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("event", kind, data))

        def on_token(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("token", text))

        task = asyncio.ensure_future(anyio.to_thread.run_sync(lambda: self._ask(on_event, on_token), limiter=limiter))
        task.add_done_callback(lambda _t: queue.put_nowait(("finished",)))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # read: no "never retrieved" log
        unwatch = shutdown.watch(lambda: queue.put_nowait(("shutdown",)))
        try:
            while True:
                item = await queue.get()
                if item[0] == "shutdown":  # the graceful-shutdown grace runs out: end with an error event
                    self.budget.cancel("the server is shutting down")
                    task.cancel()
                    yield ("error", shutdown.cut(f"question {self.answer_id[:12]}"))
                    return
                if item[0] == "finished":
                    break
                if item[0] == "token" and self.first_token_s is None:
                    self.first_token_s = time.monotonic() - self.started
                yield item
            try:
                yield ("done", check_answered(task.result()))
            except Exception as exc:  # the plan failed: reported in the stream, the server stays up
                yield ("error", as_api_error(exc))
        finally:
            unwatch()
            if not task.done():
                self.budget.cancel("the client disconnected")
