"""Streams that outlive the graceful-shutdown grace end with an error event, not a cut connection.

At SIGTERM uvicorn stops accepting and waits up to `graceful_shutdown_s` for the
requests in flight; at the end of that wait it cancels what is left, which cuts
a streaming answer mid-body and logs tracebacks. The server (`server.py`) calls
`closing()` when its shutdown starts; just before the grace runs out
(`CUT_MARGIN_S`, a quarter of a short grace) every stream still queued or
running on that event loop is told to stop: it sends its own protocol's error
event (status 503, code `server_shutting_down`), its question is cancelled, and
one warning line per cut stream is logged. A stream that ends within the grace
is not touched. The signal is per event loop, which is per server.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Callable

from ragsieve.service.common.errors import ApiError

log = logging.getLogger(__name__)
CUT_MARGIN_S = 1.0  # before uvicorn's own deadline: time for the streams to send their last event
CODE = "server_shutting_down"


class _Streams:
    def __init__(self) -> None:
        self.stops: dict[int, Callable[[], None]] = {}
        self.grace_s: float | None = None
        self.closed = False
        self._next = 0

    def add(self, stop: Callable[[], None]) -> int:
        self._next += 1
        self.stops[self._next] = stop
        if self.closed:
            stop()
        return self._next

    def close(self) -> None:
        self.closed = True
        for stop in list(self.stops.values()):
            stop()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Streams] = weakref.WeakKeyDictionary()


def _streams() -> _Streams:
    loop = asyncio.get_running_loop()
    if loop not in _by_loop:
        _by_loop[loop] = _Streams()
    return _by_loop[loop]


def cut_after(grace_s: float) -> float:
    return max(0.0, grace_s - min(CUT_MARGIN_S, grace_s / 4))


def closing(grace_s: float | None) -> None:
    """The server's shutdown began (on its event loop): streams still open near the end of `grace_s` stop."""
    if grace_s is None:  # uvicorn waits without a deadline: nothing is cut
        return
    streams = _streams()
    streams.grace_s = grace_s
    asyncio.get_running_loop().call_later(cut_after(grace_s), streams.close)


def watch(stop: Callable[[], None]) -> Callable[[], None]:
    """Call `stop` (on the loop) when the grace runs out; returns the function that unregisters it."""
    streams = _streams()
    key = streams.add(stop)
    return lambda: streams.stops.pop(key, None) and None


def cut(what: str) -> ApiError:
    """The error a cut stream sends, and its one log line."""
    grace = _streams().grace_s
    log.warning("shutdown: %s stream ended with an error event: the %.0f s graceful-shutdown grace ran out", what, grace or 0)
    return ApiError(
        503, "the server is shutting down: the answer was not finished within its graceful-shutdown grace; ask again", code=CODE
    )
