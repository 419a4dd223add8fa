"""Token streaming over an OpenAI-compatible endpoint (`stream: true`, server-sent events).

`stream_completion` sends one chat request with `stream=True` and hands every
content delta to `on_token` as it arrives, then returns the whole reply as a
`ChatReply` (usage from the final `include_usage` chunk when the server sends
it, else counted). Time limits follow progress (`ragsieve.agent.llm.deadlines`):
a stream that keeps sending tokens is never cut by a fixed timeout; a
`Watchdog` closes it when no event arrives for `timeout_s` (keep-alive
comments such as `: ping` are not events), when the first event takes longer
than the embedded model's measured rates predict, when the question's
deadline passes, or when `should_stop()` (the question cancelled: client
gone) turns true. The embedded llama.cpp server is asked for its prompt-processing
progress (`return_progress`): each progress event resets the first-token window,
so a long prompt on a busy machine is not cut while it is being read. A stream
cut for want of a first token is not sent again (`NoFirstToken`): the server
may still be working on it, and a second copy would queue behind the first.
`max_reply_bytes` bounds the text. Transport faults are
retried only *before the first token*: once text has reached the caller it
cannot be taken back, so a later fault raises `StreamBroken`. A server that
answers a streaming request with a plain JSON body (no events) is asked again
without streaming.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import openai

from ragsieve.agent.errors import BudgetExceeded, EndpointError, LLMError
from ragsieve.agent.llm.chat import ChatReply
from ragsieve.agent.llm.deadlines import Watchdog
from ragsieve.agent.llm.replies import MalformedReply, OutputMode, ReplyTooLarge, SlowReply, rejected
from ragsieve.tools.ingest.chunking import count_tokens


class StreamBroken(LLMError):
    """The stream failed after some tokens were already handed on (not retried)."""


class NoFirstToken(EndpointError):
    """No content token came within the first-token window (not retried: the prompt is not sent twice)."""


class _NoEvents(Exception):
    """The endpoint sent no stream events (it ignored `stream: true`)."""


def stream_completion(
    chat: Any,
    messages: list[dict[str, str]],
    *,
    on_token: Callable[[str], None],
    max_tokens: int | None = None,
    temperature: float | None = None,
    deadline: float | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ChatReply:
    """Stream one plain-text completion from `chat` (an `OpenAIChat`), calling `on_token` per delta."""
    model = chat.model_name if deadline is None else chat.ensure_model(deadline)
    kwargs = chat._request(model, messages, None, "reply", OutputMode.TEXT, max_tokens, temperature)
    kwargs.update(stream=True, stream_options={"include_usage": True})
    if chat.adaptive_timeouts:  # the embedded llama.cpp server: progress events while it reads the prompt
        kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "return_progress": True}
    started = time.monotonic()
    emitted = {"any": False}

    prompt_tokens_est = sum(count_tokens(str(m.get("content", ""))) for m in messages)
    first_event_s = chat.first_event_timeout(prompt_tokens_est)
    timing: dict[str, float] = {}

    def attempt() -> tuple[str, dict[str, Any]]:
        begun = time.monotonic()
        read_timeout = max(first_event_s, chat.timeout_s) + 5.0  # the watchdog decides; this is a backstop
        if deadline is not None:
            remaining = deadline - begun
            if remaining <= 0:
                raise BudgetExceeded("deadline per question reached before an LLM call")
            read_timeout = min(read_timeout, remaining + 1.0)
        parts: list[str] = []
        size, events, usage = 0, 0, {}
        stream = chat._client.chat.completions.create(**kwargs, timeout=read_timeout)
        try:
            chat.refuse_ragsieve(getattr(getattr(stream, "response", None), "headers", None))
        except Exception:
            stream.close()
            raise
        dog = Watchdog(
            lambda: _abort(stream),
            inactivity_s=chat.timeout_s,
            first_event_s=first_event_s,
            deadline=deadline,
            should_stop=should_stop,
        )
        try:
            with dog:
                for event in stream:
                    events += 1
                    dog.progress()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise BudgetExceeded(f"deadline per question reached while streaming ({size} bytes in)")
                    if getattr(event, "usage", None) is not None:
                        usage = {
                            "prompt_tokens": getattr(event.usage, "prompt_tokens", 0) or 0,
                            "completion_tokens": getattr(event.usage, "completion_tokens", 0) or 0,
                        }
                    for choice in getattr(event, "choices", None) or []:
                        if getattr(choice, "finish_reason", None):
                            timing["finish_reason"] = choice.finish_reason
                        delta = getattr(getattr(choice, "delta", None), "content", None)
                        if not delta:
                            continue
                        size += len(delta.encode("utf-8", "surrogatepass"))
                        if size > chat.max_reply_bytes:
                            raise ReplyTooLarge(
                                f"LLM endpoint {chat.shown_url} streamed over max_reply_bytes="
                                f"{chat.max_reply_bytes}; stopped reading"
                            )
                        parts.append(delta)
                        if not emitted["any"]:
                            timing["first"] = time.monotonic() - begun
                        emitted["any"] = True
                        dog.token()
                        on_token(delta)
        except (LLMError, openai.APIStatusError):
            raise
        except Exception as exc:
            if dog.reason is not None:  # the watchdog closed the stream
                raise _watchdog_error(dog, chat, size, emitted["any"]) from None
            if isinstance(exc, openai.APIError):
                if emitted["any"]:
                    raise StreamBroken(f"stream from {chat.shown_url} broke after {size} bytes: {exc}") from exc
                raise
            if isinstance(exc, (ValueError, TypeError, AttributeError)):  # an event that is not a chunk
                if emitted["any"]:
                    raise StreamBroken(f"stream from {chat.shown_url} sent a malformed event: {exc}") from exc
                raise MalformedReply(f"stream from {chat.shown_url} sent a malformed event: {exc}") from exc
            raise
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if dog.reason is not None:  # the watchdog cut the stream (the SDK may see that as a normal end)
            raise _watchdog_error(dog, chat, size, emitted["any"])
        timing["total"] = time.monotonic() - begun
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
        raise rejected(chat.shown_url, model, exc) from exc
    prompt_tokens = usage.get("prompt_tokens") or prompt_tokens_est
    completion_tokens = usage.get("completion_tokens") or count_tokens(text)
    if "first" in timing:
        chat.rates.observe(
            prompt_n=int(prompt_tokens),
            prompt_s=timing["first"],
            gen_n=int(completion_tokens),
            gen_s=max(1e-3, timing["total"] - timing["first"]),
        )
    return ChatReply(
        text=text,
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        latency_s=time.monotonic() - started,
        finish_reason=timing.get("finish_reason"),
    )


def _abort(stream: Any) -> None:
    """Stop a stream another thread is blocked reading: shut its socket down (closing the response object
    alone does not wake a blocked read), so the reader gets an error at once."""
    import socket

    response = getattr(stream, "response", None)
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return
        except OSError:
            pass
    stream.close()


def _watchdog_error(dog: Watchdog, chat: Any, size: int, emitted: bool) -> LLMError:
    message = f"stream from {chat.shown_url}: {dog.reason} ({size} bytes in)"
    if dog.kind in ("deadline", "cancelled"):
        return BudgetExceeded(message)
    if dog.kind == "first_token":
        return NoFirstToken(
            f"{message}; not sent again (the endpoint may still be reading the prompt): raise "
            f"llm.timeout_s (--request-timeout) for long prompts on a slow machine"
        )
    return StreamBroken(message) if emitted else SlowReply(message)
