"""Admission control: at most `max_concurrent` questions run, `queue_limit` wait; the rest get 429."""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager

import anyio

from ragsieve.service.common.errors import ApiError
from ragsieve.service.middleware.metrics import ServiceMetrics


class Admission:
    def __init__(self, max_concurrent: int, queue_limit: int, retry_after_s: int, metrics: ServiceMetrics):
        self.capacity = max_concurrent + queue_limit
        self.retry_after_s = retry_after_s
        self.limiter = anyio.CapacityLimiter(max_concurrent)  # the threads questions run in
        self.metrics = metrics
        self._admitted = 0
        self._lock = threading.Lock()

    @property
    def admitted(self) -> int:
        return self._admitted

    def enter(self) -> "Ticket":
        """Admit one question or raise 429 (with Retry-After) when `capacity` are already admitted."""
        with self._lock:
            if self._admitted >= self.capacity:
                self.metrics.rejected.inc()
                raise ApiError(
                    429,
                    f"the server is busy ({self.capacity} questions admitted); retry later",
                    code="queue_full",
                    headers={"Retry-After": str(self.retry_after_s)},
                )
            self._admitted += 1
        self._update()
        return Ticket(self)

    def _leave(self) -> None:
        with self._lock:
            self._admitted -= 1
        self._update()

    @asynccontextmanager
    async def slot(self):
        ticket = self.enter()
        try:
            yield ticket.limiter
        finally:
            ticket.release()

    def _update(self) -> None:
        running = self.limiter.borrowed_tokens
        self.metrics.in_flight.set(running)
        self.metrics.queue_depth.set(max(0, self._admitted - running))


class Ticket:
    """One admitted question; `release` is idempotent (a streamed response releases from two places)."""

    def __init__(self, admission: Admission):
        self.admission = admission
        self.limiter = admission.limiter
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self.admission._leave()
