"""Run the app with uvicorn: in the foreground (`ragsieve serve`) or in a thread (tests, benchmarks).

The listening socket is bound here first, so a busy port is one clear line
instead of a traceback, and port 0 picks a free port without a race. A public
address without API keys is refused unless explicitly allowed. Shutdown is
graceful: the socket stops accepting and in-flight requests may finish
within `graceful_shutdown_s`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from typing import Callable

import uvicorn

from ragsieve.agent.errors import UsageError
from ragsieve.service.settings import ServiceSettings, is_loopback

SPEC_ENV = "RAGSIEVE_SERVE_SPEC"  # how `--workers N` hands the command line to each worker process
BACKLOG = 2048


def check_exposure(settings: ServiceSettings, keys) -> None:
    if not keys.enabled and not is_loopback(settings.host) and not settings.allow_public_without_keys:
        raise UsageError(
            f"refusing to serve on {settings.host} without API keys: set RAGSIEVE_API_KEYS or "
            f"--keys-file, or pass --allow-public-without-keys to serve an open API on purpose"
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = "is in use" if exc.errno in (98, 48) else f"cannot be bound ({exc.strerror})"
        raise UsageError(f"port {port} on {host} {reason}: choose another with --port") from None
    if family in (socket.AF_INET, socket.AF_INET6):  # inherited by accepted sockets on Linux: a small
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # response body is not held for an ACK
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


class _Graceful(uvicorn.Server):
    """Streams still open when the graceful-shutdown grace runs out end with an error event (`shutdown.py`)
    instead of being cancelled by uvicorn mid-body."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        from ragsieve.service.common import shutdown

        shutdown.closing(self.config.timeout_graceful_shutdown)
        await super().shutdown(sockets)


class _Server(_Graceful):
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown (the process then dies by the signal);
    `ragsieve serve` has finished its work by then and exits with status 0."""

    on_exit: Callable[[], None] | None = None  # what else to stop at the signal (the MCP streams)

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()
        if self.on_exit is not None:
            self.on_exit()


def close_mcp_streams(app) -> Callable[[], None]:
    """At SIGTERM, end the open MCP streams (a client's standalone GET stream never ends by itself, so the
    graceful shutdown would wait its whole `graceful_shutdown_s` for it): the session manager's tasks are
    cancelled on the event loop; questions in flight on other routes still finish."""

    def stop() -> None:
        group = getattr(getattr(app.state, "mcp", None), "_task_group", None)
        if group is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon_threadsafe(group.cancel_scope.cancel)

    return stop


# uvicorn's `proxy_headers` (on by default, trusting 127.0.0.1 or $FORWARDED_ALLOW_IPS) rewrites the client
# address from `X-Forwarded-For`, which any local client can forge: the trusted-proxy check of forwarded
# identities (`[identity] trusted_proxies`) would then trust a header. It is off: the address the service
# sees is always the socket peer (the proxy itself when there is one).
def uvicorn_config(app, settings: ServiceSettings, **more) -> uvicorn.Config:
    from ragsieve.service.middleware.connections import guarded_protocol

    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=guarded_protocol(settings.idle_timeout_s),  # idle sockets cannot deny service
        limit_concurrency=settings.max_connections,
        backlog=BACKLOG,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=int(settings.graceful_shutdown_s),
        h11_max_incomplete_event_size=64 * 1024,
        proxy_headers=False,
        **more,
    )  # the client is the socket peer: see below


def serve_foreground(app, settings: ServiceSettings, sock: socket.socket | None = None) -> None:
    sock = sock or bind(settings.host, settings.port)
    server = _Server(uvicorn_config(app, settings))
    server.on_exit = close_mcp_streams(app)
    server.run(sockets=[sock])


def serve_workers(spec: dict, settings: ServiceSettings) -> None:
    """`--workers N`: uvicorn starts N processes, each building the app from `spec` (own indexes and model)."""
    from ragsieve.service.middleware.connections import IDLE_ENV, WORKER_PROTOCOL

    bind(settings.host, settings.port).close()  # a busy port is reported before the workers start
    os.environ[IDLE_ENV] = str(settings.idle_timeout_s)
    os.environ[SPEC_ENV] = json.dumps(spec)
    uvicorn.run(
        "ragsieve.service.factory:app_from_env",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level="warning",
        access_log=False,
        http=WORKER_PROTOCOL,
        proxy_headers=False,
        limit_concurrency=settings.max_connections,
        backlog=BACKLOG,
        timeout_graceful_shutdown=int(settings.graceful_shutdown_s),
    )


class ServiceThread:
    """The app served on 127.0.0.1 in a background thread, for at most `lifetime_s` (then it stops itself)."""

    def __init__(self, app, settings: ServiceSettings | None = None, *, lifetime_s: float = 600.0):
        self.settings = settings or ServiceSettings(port=0)
        if not is_loopback(self.settings.host):
            raise UsageError("ServiceThread serves on loopback only")
        self._sock = bind(self.settings.host, self.settings.port)
        self.port = self._sock.getsockname()[1]
        self.server = _Graceful(uvicorn_config(app, self.settings))  # off the main thread: no signal handlers
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, name="ragsieve-service", daemon=True
        )
        self._stopper = threading.Timer(lifetime_s, self.stop)
        self._stopper.daemon = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "ServiceThread":
        self._thread.start()
        self._stopper.start()
        ends = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > ends or not self._thread.is_alive():
                raise RuntimeError("the service did not start")
            time.sleep(0.02)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopper.cancel()
        self.server.should_exit = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> "ServiceThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
