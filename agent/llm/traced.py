"""The span of one model call (`LLM._complete`): model, sampling settings, tokens, latency, cache hit and
finish reason, per OpenInference (`llm.*`) and the OTel GenAI conventions (`gen_ai.*`); retries and
structured-output failures are counted on it by the retrying code and `LLM.structured`. The messages and the
reply go in only with `[tracing] capture_content` on, redacted. Off: the call runs as it is."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from ragsieve.tools import tracing
from ragsieve.tools.tracing import conventions as c

F = TypeVar("F", bound=Callable[..., Any])


def llm_span(fn: F) -> F:
    """`_complete(self, messages, json_schema, name, max_tokens, temperature, on_token=None)` in a span."""

    @functools.wraps(fn)
    def complete(
        self: Any,
        messages: list[dict[str, str]],
        json_schema: Any,
        name: str,
        max_tokens: Any,
        temperature: Any,
        on_token: Any = None,
    ) -> Any:
        if not tracing.enabled():
            return fn(self, messages, json_schema, name, max_tokens, temperature, on_token)
        model = str(getattr(self.chat, "model_name", "?"))
        attributes = {
            c.LLM_MODEL: model,
            c.GEN_AI_OPERATION: "chat",
            c.GEN_AI_SYSTEM: "openai",
            c.GEN_AI_MODEL: model,
            c.GEN_AI_MAX_TOKENS: max_tokens if max_tokens is not None else self.max_tokens,
            c.GEN_AI_TEMPERATURE: temperature if temperature is not None else self.temperature,
            "ragsieve.llm.output": name,
            "ragsieve.llm.structured": json_schema is not None,
            "ragsieve.llm.streamed": on_token is not None,
            "ragsieve.llm.messages": len(messages),
        }
        with tracing.span(f"chat {model}", tracing.Kind.LLM, attributes) as span:
            if span.captures:  # the prompt's text only when the operator asked for text
                for n, message in enumerate(messages):
                    span.text(f"{c.LLM_INPUT_MESSAGES}.{n}.message.role", message.get("role", ""))
                    span.text(f"{c.LLM_INPUT_MESSAGES}.{n}.message.content", str(message.get("content", "")))
                if messages:
                    span.text(c.INPUT_VALUE, str(messages[-1].get("content", "")))
            reply = fn(self, messages, json_schema, name, max_tokens, temperature, on_token)
            if not span.recording:
                return reply
            span.update(
                {
                    c.LLM_PROMPT_TOKENS: reply.prompt_tokens,
                    c.LLM_COMPLETION_TOKENS: reply.completion_tokens,
                    c.LLM_TOTAL_TOKENS: reply.prompt_tokens + reply.completion_tokens,
                    c.GEN_AI_INPUT_TOKENS: reply.prompt_tokens,
                    c.GEN_AI_OUTPUT_TOKENS: reply.completion_tokens,
                    "ragsieve.llm.latency_s": round(reply.latency_s, 4),
                    "ragsieve.llm.cache_hit": reply.cached,
                    c.GEN_AI_FINISH: [reply.finish_reason] if reply.finish_reason else None,
                }
            )
            if span.captures:
                span.text(c.OUTPUT_VALUE, reply.text)
                span.text(f"{c.LLM_OUTPUT_MESSAGES}.0.message.role", "assistant")
                span.text(f"{c.LLM_OUTPUT_MESSAGES}.0.message.content", reply.text)
            return reply

    return complete  # type: ignore[return-value]
