"""What a chat endpoint's reply can be refused for, shared by the plain call (`openai_chat`) and the stream
(`streaming`): the output modes, the reply errors, and the one-line error for a rejected request."""

from __future__ import annotations

from enum import Enum

import openai

from ragsieve.agent.errors import LLMError
from ragsieve.agent.llm.overflow import context_overflow
from ragsieve.agent.llm.redact import redact


class OutputMode(str, Enum):
    AUTO = "auto"
    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    TEXT = "text"


class MalformedReply(LLMError):
    """The endpoint answered 2xx with a body that is not a chat completion (retried)."""


class SlowReply(LLMError):
    """The reply took longer than its time limit in all (e.g. trickled byte by byte). Not retried: the server
    was working on the request, and sending it again would repeat that work (issue 44: ten re-sent prompts
    of 300-430 s each on a busy machine); the caller reports it."""


class ReplyTooLarge(LLMError):
    """The reply body exceeded `max_reply_bytes` (not retried: the same request would do it again)."""


def describe(exc: BaseException | None) -> str:
    """An error in one redacted line of at most 500 characters."""
    if exc is None:
        return "no error recorded"
    if isinstance(exc, openai.APIStatusError):
        return redact(f"HTTP {exc.status_code}: {exc.message}")[:500]
    return redact(f"{type(exc).__name__}: {exc}")[:500]


def rejected(shown_url: str, model: str, exc: openai.APIStatusError) -> LLMError:
    """The error for a request the endpoint refused: `ContextOverflow` when it says the prompt is over the
    model's window (`ragsieve.agent.llm.overflow`), else `LLMError`."""
    message = f"LLM endpoint {shown_url} (model {model}) rejected the request: {describe(exc)}"
    return context_overflow(exc.status_code, f"{exc.message} {exc.body}", message) or LLMError(message)
