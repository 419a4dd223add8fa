"""Spans of a question and of each plan step, made from the same records as the answer's trace.

`question_span` wraps `Orchestrator.ask`: one span per question (the root of a CLI question's trace, the child
of the request span in the service), whose attributes come from the returned `Answer`. `step_span` wraps the
runner's `_run_one`: one span per step run (each judge round, expand, conformal, outliers, segments, answer,
validate, fallback), whose attributes are read from the `TraceEvent` the step just appended (at export, in
the exporter's thread on ragsieve's own provider: `Span.later`). Text (the
question, the answer, a step's summary) goes in only through `Span.text`: dropped unless the operator turned
`[tracing] capture_content` on, redacted otherwise. While tracing is off both wrappers call through at once.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, TypeVar

from ragsieve.tools import tracing
from ragsieve.tools.tracing.conventions import INPUT_VALUE, OUTPUT_VALUE

F = TypeVar("F", bound=Callable[..., Any])


def _usage(prefix: str, usage: Any) -> dict[str, Any]:
    """The LLM usage as attributes; only the call count when there was none (a step without model calls)."""
    if not usage.calls and not usage.cached_calls:
        return {f"{prefix}.calls": 0}
    return {
        f"{prefix}.calls": usage.calls,
        f"{prefix}.cached_calls": usage.cached_calls,
        f"{prefix}.prompt_tokens": usage.prompt_tokens,
        f"{prefix}.completion_tokens": usage.completion_tokens,
        f"{prefix}.latency_s": round(usage.latency_s, 4),
    }


def _numbers(prefix: str, summary: dict[str, Any]) -> dict[str, Any]:
    """A summary's numbers and flags as attributes, and the size of each list (ids and text stay out)."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, (bool, int, float)):
            out[f"{prefix}.{key}"] = value
        elif isinstance(value, (list, tuple, dict)):
            out[f"{prefix}.{key}.count"] = len(value)
    return out


def _step_attributes(event: Any) -> dict[str, Any]:
    """A step span's attributes from the `TraceEvent` the step appended (which no later step changes)."""
    return {
        "ragsieve.step.outcome": event.outcome,
        "ragsieve.step.duration_s": event.duration_s,
        **_usage("ragsieve.step.llm", event.usage),
        **_numbers("ragsieve.step", event.summary_dict()),
    }


def step_span(fn: F) -> F:
    """`_run_one(plan, name, state, deps)` inside the span `ragsieve.step.<name>`."""

    @functools.wraps(fn)
    def run_one(plan: Any, name: str, state: Any, deps: Any) -> Any:
        if not tracing.enabled():
            return fn(plan, name, state, deps)
        attributes = {"ragsieve.step": name, "ragsieve.step.number": state.steps_taken}  # the plan: on the question
        with tracing.span(f"ragsieve.step.{name}", tracing.Kind.CHAIN, attributes) as span:
            events = len(state.trace)
            result = fn(plan, name, state, deps)
            if span.recording and len(state.trace) > events:  # the event this step appended: the span says it
                event = state.trace[-1]
                span.later(functools.partial(_step_attributes, event))  # built at export: the answer does not wait
                if span.captures:  # the summary's text only when the operator asked for text
                    span.text("ragsieve.step.summary", json.dumps(event.summary_dict(), default=str, ensure_ascii=False))
            return result

    return run_one  # type: ignore[return-value]


def question_span(fn: F) -> F:
    """`Orchestrator.ask(question, ...)` inside the span `ragsieve.question`; the `Answer` gets the trace id."""

    @functools.wraps(fn)
    def ask(self: Any, question: str, **kwargs: Any) -> Any:
        if not tracing.enabled():
            return fn(self, question, **kwargs)
        plan = kwargs.get("plan") or self.config.plan
        root = getattr(self.index, "root", None)
        attributes = {
            "ragsieve.plan": plan,
            "ragsieve.index": str(root) if root is not None else None,
            "ragsieve.question.chars": len(question),
            "ragsieve.follow_up": bool(kwargs.get("history")),
        }
        with tracing.span("ragsieve.question", tracing.Kind.CHAIN, attributes) as span:
            span.text(INPUT_VALUE, question)
            answer = fn(self, question, **kwargs)
            answer.trace_id = tracing.trace_id()
            if not span.recording:  # sampled out: the trace id still joins the caller's logs
                return answer
            span.text(OUTPUT_VALUE, answer.answer)
            stopped = answer.stopped
            span.update(
                {
                    "ragsieve.grounding": answer.grounding.value,
                    "ragsieve.resolved": answer.resolved,
                    "ragsieve.abstention": getattr(answer.abstention, "value", answer.abstention),
                    "ragsieve.stopped": bool(stopped),
                    "ragsieve.steps": [e.step for e in answer.trace],
                    "ragsieve.context.ids": [h.chunk_id for h in answer.context],
                    "ragsieve.citations": [c.chunk_id for c in answer.citations],
                    "ragsieve.llm.calls": answer.usage.calls,
                    "ragsieve.llm.cached_calls": answer.usage.cached_calls,
                    "ragsieve.llm.latency_s": round(answer.usage.latency_s, 4),
                    "llm.token_count.prompt": answer.usage.prompt_tokens,
                    "llm.token_count.completion": answer.usage.completion_tokens,
                    "llm.token_count.total": answer.usage.prompt_tokens + answer.usage.completion_tokens,
                }
            )
            if stopped:
                span.event("ragsieve.stopped", {"reason": stopped})
            return answer

    return ask  # type: ignore[return-value]
