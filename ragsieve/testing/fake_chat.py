"""A scripted chat model for tests: replays queued replies and records every request."""

from __future__ import annotations

import re
import time
from collections import deque
from typing import Any, Callable, Union

from ragsieve.agent.llm.chat import ChatReply

Scripted = Union[str, Exception, Callable[[list[dict[str, str]]], str]]


class FakeChat:
    """Each `complete` pops the next scripted item: a string is the reply, an
    exception is raised, a callable gets the messages and returns the reply.
    When the queue is empty, `default` (if set) answers; otherwise it fails."""

    accepts_deadline = False  # a scripted reply is instant

    def __init__(
        self,
        replies: list[Scripted] | None = None,
        *,
        default: Scripted | None = None,
        model_name: str = "fake",
        token_delay_s: float = 0.0,
    ) -> None:
        self.queue: deque[Scripted] = deque(replies or [])
        self.default = default
        self.model_name = model_name
        self.history: list[dict[str, Any]] = []
        self.token_delay_s = token_delay_s  # `stream` sleeps this long before each token

    def push(self, *replies: Scripted) -> None:
        self.queue.extend(replies)

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        self.history.append(
            {
                "messages": messages,
                "json_schema": json_schema,
                "schema_name": schema_name,
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
        )
        if self.queue:
            item = self.queue.popleft()
        elif self.default is not None:
            item = self.default
        else:
            raise AssertionError(f"FakeChat: no scripted reply left for request #{len(self.history)}")
        if isinstance(item, Exception):
            raise item
        text = item(messages) if callable(item) else item
        prompt_tokens = sum(len(m.get("content", "").split()) for m in messages)
        return ChatReply(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()), latency_s=0.0)

    def stream(
        self,
        messages: list[dict[str, str]],
        *,
        on_token: Callable[[str], None],
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        """Like `complete`, then hands the reply to `on_token` word by word (with `token_delay_s` between)."""
        reply = self.complete(messages, max_tokens=max_tokens, temperature=temperature)
        self.history[-1]["stream"] = True
        for piece in re.findall(r"\S+\s*|\s+", reply.text):
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            on_token(piece)
        return reply
