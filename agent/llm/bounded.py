"""A `ChatModel` wrapper allowing at most `limit` calls at once (the embedded server's parallel slots)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ragsieve.agent.errors import BudgetExceeded


class BoundedChat:
    """Calls beyond `limit` wait for a free slot, never past the question's deadline."""

    def __init__(self, chat: Any, limit: int) -> None:
        if isinstance(chat, BoundedChat):
            chat = chat.inner
        self.inner: Any = chat
        self.limit = int(limit)
        self._slots = threading.BoundedSemaphore(self.limit)

    def __getattr__(self, name: str) -> Any:  # model_name, cache_identity, accepts_deadline, ...
        return getattr(self.inner, name)

    def _acquire(self, deadline: float | None) -> None:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._slots.acquire(timeout=timeout):
            raise BudgetExceeded("deadline per question reached while waiting for a free LLM slot")

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        self._acquire(kwargs.get("deadline"))
        try:
            return self.inner.complete(messages, **kwargs)
        finally:
            self._slots.release()

    @property
    def stream(self) -> Callable[..., Any]:
        inner = self.inner.stream  # AttributeError when the model cannot stream

        def call(messages: list[dict[str, str]], **kwargs: Any) -> Any:
            self._acquire(kwargs.get("deadline"))
            try:
                return inner(messages, **kwargs)
            finally:
                self._slots.release()

        return call
