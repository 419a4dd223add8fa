"""What one question may spend on the LLM: a wall-clock deadline, a number of calls, a number of tokens.

One `QuestionBudget` is shared by every step of a plan (and every judge batch
thread); `LLM` checks it before each uncached call and charges each reply.
Once spent it stays spent, with the reason, so the runner can end the plan
even when a step caught the error and carried on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ragsieve.agent.errors import BudgetExceeded, UsageError


class QuestionBudget:
    """`deadline_s` seconds from creation, `max_calls` LLM calls, `max_tokens` prompt+completion tokens."""

    def __init__(
        self,
        deadline_s: float | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("deadline_s", deadline_s), ("max_calls", max_calls), ("max_tokens", max_tokens)):
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise UsageError(f"question budget {name} must be > 0 (or None for no limit), got {value!r}")
        self._clock = clock
        self.deadline_s, self.max_calls, self.max_tokens = deadline_s, max_calls, max_tokens
        self.deadline = None if deadline_s is None else clock() + float(deadline_s)
        self.calls = 0
        self.tokens = 0
        self.exhausted: str | None = None
        self._lock = threading.Lock()

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - self._clock()

    def spent(self) -> bool:
        """Whether the plan must stop now: a call was refused, or the deadline passed (checked between steps)."""
        with self._lock:
            if self.exhausted is None and self.deadline is not None and self._clock() >= self.deadline:
                self.exhausted = f"deadline of {self.deadline_s:g}s per question reached"
            return self.exhausted is not None

    def check(self) -> None:
        """Raise `BudgetExceeded` (and remember why) when no further call may start."""
        with self._lock:
            reason = self.exhausted
            if reason is None:
                if self.deadline is not None and self._clock() >= self.deadline:
                    reason = f"deadline of {self.deadline_s:g}s per question reached"
                elif self.max_calls is not None and self.calls >= self.max_calls:
                    reason = f"LLM call budget of {self.max_calls} per question spent"
                elif self.max_tokens is not None and self.tokens >= self.max_tokens:
                    reason = f"token budget of {self.max_tokens} per question spent ({self.tokens} used)"
                self.exhausted = reason
        if reason is not None:
            raise BudgetExceeded(reason)

    def charge(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.calls += 1
            self.tokens += int(prompt_tokens) + int(completion_tokens)

    def mark(self, reason: str) -> None:
        """Record that a call was cut short (deadline hit inside a call)."""
        with self._lock:
            self.exhausted = self.exhausted or reason

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Stop the question: the next check, step boundary or streamed token ends the plan (client gone)."""
        self.mark(reason)
