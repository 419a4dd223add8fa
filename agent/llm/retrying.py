"""Retrying a chat endpoint's call: which faults are retried, how long to wait, and the one-line errors.

Transport faults (429, 5xx, connect timeouts, refused connections, a body that is not JSON) are retried by
tenacity with exponential backoff and full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter",
2015: sleep = U(0, min(cap, base * 2**n))), honouring `Retry-After` / `retry-after-ms`; attempts and total time
are both bounded, and so is the question's `deadline`. A call cut by a time limit (`SlowReply`) or whose server
accepted it and then stayed silent past the read timeout is not sent again: the server was working on it.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable

import openai
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay

from ragsieve.agent.errors import BudgetExceeded, EndpointError
from ragsieve.agent.llm.replies import MalformedReply, SlowReply
from ragsieve.agent.llm.replies import describe as _describe
from ragsieve.agent.llm.wire import retry_after_s
from ragsieve.tools import tracing

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
DEADLINE_SLACK_S = 0.05  # a read timeout set to the deadline's remaining time ends about at the deadline
_UNSENT_TIMEOUTS = ("ConnectTimeout", "PoolTimeout")  # httpx's (the SDK bundles its own copy: matched by name)


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, MalformedReply):
        return True
    if isinstance(exc, openai.APITimeoutError):  # retried only when the request never reached the server
        return type(exc.__cause__).__name__ in _UNSENT_TIMEOUTS
    if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def backoff_wait(state: RetryCallState, max_retry_s: float, deadline: float | None = None) -> float:
    """Seconds before the next attempt: the server's `Retry-After`, else full jitter; never past the bounds."""
    exc = state.outcome.exception() if state.outcome else None
    asked = None
    if isinstance(exc, openai.APIStatusError):
        asked = retry_after_s(exc.response.headers)
    remaining = max(0.0, max_retry_s - (state.seconds_since_start or 0.0))  # total time is bounded
    if deadline is not None:
        remaining = min(remaining, max(0.0, deadline - time.monotonic()))
    if asked is not None:
        return min(asked, remaining)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (state.attempt_number - 1))
    return min(random.uniform(0.0, ceiling), remaining)


def _retrying(shown_url: str, state: RetryCallState) -> None:
    """The warning line of a failed attempt, and the retry counted on the call's span."""
    fault = state.outcome.exception() if state.outcome else None
    log.warning(
        "LLM endpoint %s attempt %d failed (%s); retrying",
        shown_url,
        state.attempt_number,
        _describe(fault) if fault is not None else "?",
    )
    tracing.count("ragsieve.llm.retries")
    tracing.event("ragsieve.llm.retry", {"attempt": state.attempt_number, "error": type(fault).__name__})


def call_with_retries(
    fn: Callable[[], Any],
    *,
    shown_url: str,
    model: str,
    deadline: float | None,
    max_attempts: int,
    max_retry_s: float,
    sleep: Callable[[float], None],
) -> Any:
    """`fn()`, retried on transport faults within the bounds; a fault that is not retried, or the last one,
    becomes `EndpointError` (or `BudgetExceeded` at the deadline) in one line naming the endpoint."""

    def past_deadline(state: RetryCallState) -> bool:
        return deadline is not None and time.monotonic() >= deadline

    bounded = stop_after_attempt(max_attempts) | stop_after_delay(max_retry_s)

    def stop(state: RetryCallState) -> bool:
        return bool(bounded(state)) or past_deadline(state)

    retrying = Retrying(
        stop=stop,
        wait=lambda state: backoff_wait(state, max_retry_s, deadline),
        retry=retry_if_exception(retryable),
        sleep=sleep,
        reraise=False,
        before_sleep=lambda s: _retrying(shown_url, s),
    )
    started = time.monotonic()
    try:
        return retrying(fn)
    except (SlowReply, openai.APITimeoutError) as exc:  # not retried (`retryable`): the server was working
        if deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S:
            raise BudgetExceeded(f"deadline per question reached while waiting for {shown_url}: {_describe(exc)}") from None
        raise EndpointError(
            f"LLM endpoint {shown_url} (model {model}) did not answer in time after 1 attempt(s) in "
            f"{time.monotonic() - started:.1f}s; not sent again (the server may still be working on it): "
            f"raise llm.timeout_s (--request-timeout) for a slow model; last error: {_describe(exc)}",
            base_url=shown_url,
            attempts=1,
        ) from exc
    except RetryError as exc:
        attempt = exc.last_attempt
        last = attempt.exception() or RuntimeError("no exception recorded")
        if deadline is not None and time.monotonic() >= deadline:
            raise BudgetExceeded(
                f"deadline per question reached after {attempt.attempt_number} attempt(s) "
                f"at {shown_url}; last error: {_describe(last)}"
            ) from None
        raise EndpointError(
            f"LLM endpoint {shown_url} (model {model}) failed after {attempt.attempt_number} "
            f"attempt(s) in {time.monotonic() - started:.1f}s (limits: {max_attempts} attempts, "
            f"{max_retry_s:g}s); last error: {_describe(last)}",
            base_url=shown_url,
            attempts=attempt.attempt_number,
        ) from last
