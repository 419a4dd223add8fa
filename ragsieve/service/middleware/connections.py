"""HTTP connections that cannot deny service by idling (hostile re-run: ~1,000 idle sockets made every
route 503, `/healthz` included, without a key).

uvicorn's `limit_concurrency` counts open connections, idle ones too, and it
has no deadline for a request's headers: a client that opens sockets and
sends nothing (or a byte now and then) holds the server's capacity forever.
`guarded_protocol` returns uvicorn's h11 protocol with two changes:
- a connection must deliver a whole request head within `idle_timeout_s` of
  opening or of its previous response (a trickle of bytes does not extend
  it), else it is closed;
- beyond `max_connections` open connections, the oldest *idle* one (no
  request in progress) is closed to make room, and only when none is idle is
  the new connection refused; requests in progress are never counted against
  each other here (questions have their own admission limit: 429);
- a request head over uvicorn's limit (`h11_max_incomplete_event_size`, 64 KiB)
  gets `431 Request Header Fields Too Large` (another malformed head: 400) that
  the client can read: the reply is sent, the write side shut, and what the
  client still sends is read and dropped (up to DRAIN_BYTES, DRAIN_S) before
  the socket closes; closing at once, with the client's bytes unread, made the
  kernel reset the connection and the client never saw the status line.
"""

from __future__ import annotations

import os

from uvicorn.protocols.http.h11_impl import H11Protocol

DRAIN_BYTES = 8 * 1024 * 1024  # what a refused client may still send (read and dropped) before the close
DRAIN_S = 5.0
IDLE_ENV = "RAGSIEVE_IDLE_TIMEOUT_S"  # how `--workers N` hands the timeout to each worker process
WORKER_PROTOCOL = "ragsieve.service.middleware.connections:WorkerProtocol"


class GuardedH11Protocol(H11Protocol):
    idle_timeout_s: float = 10.0  # a head must arrive within this; `guarded_protocol` sets it
    limit_concurrency: int | None  # uvicorn's, declared for mypy where uvicorn is absent (`.[dev]` only)

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        self.max_connections = self.limit_concurrency
        self.limit_concurrency = None  # uvicorn's check counts idle sockets: replaced below
        self._head_timer = None
        self._armed_cycle = None
        self._drained: int | None = None  # bytes read since a refused head (None: not refused)

    def _arm(self) -> None:
        self._disarm()
        self._armed_cycle = self.cycle
        self._head_timer = self.loop.call_later(self.idle_timeout_s, self._idle_close)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _idle_close(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing() and self.cycle is self._armed_cycle:
            self.transport.close()

    def _idle(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            idle = [c for c in self.connections if c is not self and getattr(c, "_idle", lambda: False)()]
            if idle:
                victim = min(idle, key=lambda c: getattr(c, "_opened", 0.0))
                victim.transport.close()
            else:
                transport.close()
                return
        self._opened = self.loop.time()
        self._arm()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's reply to a head h11 refused: 431 when it was too large, readable by the client."""
        limit = self.config.h11_max_incomplete_event_size or 16 * 1024  # uvicorn's (h11's) default when unset
        too_big = len(self.conn.trailing_data[0]) >= limit
        status, reason, body = (
            (431, "Request Header Fields Too Large", f"the request head is over {limit} bytes: send smaller headers\n")
            if too_big
            else (400, "Bad Request", msg + "\n")
        )
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n{body}".encode("ascii")
        )
        self._disarm()
        self._drained = 0
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(DRAIN_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self._drained is not None:  # refused: read and drop, bounded
            self._drained += len(data)
            if self._drained > DRAIN_BYTES:
                self.transport.close()
            return
        super().data_received(data)
        if self._head_timer is not None and self.cycle is not self._armed_cycle:
            self._disarm()  # a new request's head arrived in time

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded_protocol(idle_timeout_s: float) -> type[GuardedH11Protocol]:
    """The guarded protocol class with this idle timeout (uvicorn takes a class, not an instance)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"idle_timeout_s": float(idle_timeout_s)})


class WorkerProtocol(GuardedH11Protocol):
    """The guarded protocol for `--workers N` (uvicorn imports it by name in each worker process)."""

    def _arm(self) -> None:
        self._disarm()
        self._armed_cycle = self.cycle
        self._head_timer = self.loop.call_later(float(os.environ.get(IDLE_ENV, "10")), self._idle_close)
