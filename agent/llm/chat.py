"""The chat-model seam: what every LLM backend (OpenAI client, fake) implements."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from pydantic import BaseModel


class ChatReply(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None  # "length" when max_tokens cut the reply (None: not reported)


class Usage(BaseModel):
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def add_reply(self, reply: ChatReply) -> None:
        if reply.cached:
            self.cached_calls += 1
            return
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.latency_s += reply.latency_s

    def plus(self, other: "Usage") -> "Usage":
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})

    def minus(self, other: "Usage") -> "Usage":
        return Usage(**{k: getattr(self, k) - getattr(other, k) for k in Usage.model_fields})


class ChatModel(Protocol):
    """One chat completion. `json_schema`, when given, asks for output matching it. `model_name` names the model
    (reply caches and calibration records key on it; "" where none is known); `accepts_deadline` says whether
    `complete` (and `stream`, where a model streams) take the question's `deadline` (a `time.monotonic()` time)
    and a stream's `should_stop`."""

    @property
    def model_name(self) -> str: ...

    @property
    def accepts_deadline(self) -> bool: ...

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply: ...


class UsageMeter:
    """Thread-safe running total of LLM usage (judge batches run concurrently)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = Usage()

    def record(self, reply: ChatReply) -> None:
        with self._lock:
            self._usage.add_reply(reply)

    def snapshot(self) -> Usage:
        with self._lock:
            return self._usage.model_copy()
