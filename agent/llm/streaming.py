"""Token streaming over an OpenAI-compatible endpoint (`stream: true`, server-sent events).

`stream_completion` sends one chat request with `stream=True` and hands every
content delta to `on_token` as it arrives, then returns the whole reply as a
`ChatReply` (usage from the final `include_usage` chunk when the server sends
it, else counted). The same bounds as a plain call hold: the question's
deadline and `timeout_s` bound the whole stream, `max_reply_bytes` bounds the
text. Transport faults are retried only *before the first token*: once text
has reached the caller it cannot be taken back, so a later fault raises
`StreamBroken`. A server that answers a streaming request with a plain JSON
body (no events) is asked again without streaming.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import openai

from ragsieve.agent.errors import BudgetExceeded, LLMError
from ragsieve.agent.llm.chat import ChatReply
from ragsieve.tools.ingest.chunking import count_tokens


class StreamBroken(LLMError):
    """The stream failed after some tokens were already handed on (not retried)."""


class _NoEvents(Exception):
    """The endpoint sent no stream events (it ignored `stream: true`)."""


def stream_completion(chat, messages: list[dict[str, str]], *, on_token: Callable[[str], None],
                      max_tokens: int | None = None, temperature: float | None = None,
                      deadline: float | None = None) -> ChatReply:
    """Stream one plain-text completion from `chat` (an `OpenAIChat`), calling `on_token` per delta."""
    from ragsieve.agent.llm.openai_chat import MalformedReply, OutputMode, ReplyTooLarge, SlowReply

    model = chat.model_name if deadline is None else chat.ensure_model(deadline)
    kwargs = chat._request(model, messages, None, "reply", OutputMode.TEXT, max_tokens, temperature)
    kwargs.update(stream=True, stream_options={"include_usage": True})
    started = time.monotonic()
    emitted = {"any": False}

    def attempt() -> tuple[str, dict[str, Any]]:
        timeout = chat.timeout_s
        call_ends = time.monotonic() + chat.timeout_s
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BudgetExceeded("deadline per question reached before an LLM call")
            timeout = min(timeout, remaining)
        parts: list[str] = []
        size, events, usage = 0, 0, {}
        try:
            stream = chat._client.chat.completions.create(**kwargs, timeout=timeout)
        except openai.APIStatusError:
            raise
        try:
            for event in stream:
                events += 1
                if deadline is not None and time.monotonic() >= deadline:
                    raise BudgetExceeded(f"deadline per question reached while streaming ({size} bytes in)")
                if time.monotonic() >= call_ends:
                    raise SlowReply(f"stream not complete after timeout_s={chat.timeout_s:g}s ({size} bytes in)")
                if getattr(event, "usage", None) is not None:
                    usage = {"prompt_tokens": getattr(event.usage, "prompt_tokens", 0) or 0,
                             "completion_tokens": getattr(event.usage, "completion_tokens", 0) or 0}
                for choice in getattr(event, "choices", None) or []:
                    delta = getattr(getattr(choice, "delta", None), "content", None)
                    if not delta:
                        continue
                    size += len(delta.encode("utf-8", "surrogatepass"))
                    if size > chat.max_reply_bytes:
                        raise ReplyTooLarge(f"LLM endpoint {chat.shown_url} streamed over max_reply_bytes="
                                            f"{chat.max_reply_bytes}; stopped reading")
                    parts.append(delta)
                    emitted["any"] = True
                    on_token(delta)
        except (LLMError, openai.APIStatusError):
            raise
        except openai.APIError as exc:
            if emitted["any"]:
                raise StreamBroken(f"stream from {chat.shown_url} broke after {size} bytes: {exc}") from exc
            raise
        except (ValueError, TypeError, AttributeError) as exc:  # an event that is not a chunk
            if emitted["any"]:
                raise StreamBroken(f"stream from {chat.shown_url} sent a malformed event: {exc}") from exc
            raise MalformedReply(f"stream from {chat.shown_url} sent a malformed event: {exc}") from exc
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if events == 0:
            raise _NoEvents()
        return "".join(parts), usage

    def guarded() -> tuple[str, dict[str, Any]]:
        try:
            return attempt()
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            if emitted["any"]:  # text already handed on: never retried
                raise StreamBroken(f"stream from {chat.shown_url} broke: {exc}") from exc
            raise

    try:
        text, usage = chat._call(guarded, model, deadline)
    except _NoEvents:
        reply = chat.complete(messages, max_tokens=max_tokens, temperature=temperature, deadline=deadline)
        on_token(reply.text)
        return reply
    except openai.APIStatusError as exc:
        raise LLMError(f"LLM endpoint {chat.shown_url} (model {model}) rejected the request: "
                       f"HTTP {exc.status_code}") from exc
    prompt_tokens = usage.get("prompt_tokens") or sum(count_tokens(str(m.get("content", ""))) for m in messages)
    completion_tokens = usage.get("completion_tokens") or count_tokens(text)
    return ChatReply(text=text, prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens),
                     latency_s=time.monotonic() - started)
