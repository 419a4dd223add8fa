"""Opening and closing Milvus clients, with milvus-lite's one-process-per-file rule made explicit.

milvus-lite runs an in-process server per file and holds a `flock` on
`<file>/LOCK` until that server stops: while another process has the file open
(a build, `ragsieve serve`, a reader), nothing else can open it. `client_for`
waits up to `wait_s` for such a holder, then fails with `IndexBusyError` saying
so (a CLI process releases the file when it exits; `stop_lite_server` releases
it from a long-lived one).
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from ragsieve.tools.errors import IndexMissingError, ModelUnavailableError

_users: dict[str, int] = {}  # milvus-lite file -> open clients of this process
_guard = threading.Lock()
POLL_S = 0.5


def is_lite(uri: str) -> bool:
    return "://" not in uri


def client_for(uri: str, token: str | None = None, wait_s: float | None = 0.0):
    """A client for `uri`; a milvus-lite file held by another process is waited for `wait_s` seconds
    (None: for ever), then refused with `IndexBusyError`."""
    from ragsieve.tools.index.lock import IndexBusyError

    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise ModelUnavailableError("the milvus backend needs pymilvus (and milvus-lite for a local file): "
                                    "pip install 'ragsieve[milvus]'") from exc
    started = time.monotonic()
    while is_lite(uri) and _held_elsewhere(uri):
        waited = time.monotonic() - started
        if wait_s is not None and waited >= wait_s:
            raise IndexBusyError(f"the milvus-lite file {uri} is open in another process (a build, `ragsieve "
                                 f"serve` or a reader); waited {waited:.1f}s. milvus-lite serves one process at a "
                                 f"time: stop the other one, or publish to a Milvus server") from None
        time.sleep(POLL_S)
    key = os.path.abspath(uri)
    with _guard:  # counted before it opens: a concurrent release cannot stop the server under it
        try:
            client = MilvusClient(uri=uri, token=token or "")
        except Exception as exc:  # pymilvus raises MilvusException / ConnectionError variants
            raise IndexMissingError(f"cannot reach Milvus at {uri}: {type(exc).__name__}: "
                                    f"{str(exc)[:200]}") from None
        if is_lite(uri):
            _users[key] = _users.get(key, 0) + 1
    return client


def release_client(client, uri: str) -> None:
    """Close `client`. This process's milvus-lite server for the file keeps running (and the file locked) until
    the process exits or `stop_lite_server` is called: stopping it while pymilvus keeps pooled connections to it
    left collections released under other clients of this process (measured: milvus-lite 3.2.2)."""
    try:
        client.close()
    except Exception:  # pragma: no cover - closing is best effort
        pass
    if is_lite(uri):
        with _guard:
            key = os.path.abspath(uri)
            _users[key] = max(0, _users.get(key, 1) - 1)


def stop_lite_server(uri: str) -> None:
    """Stop this process's milvus-lite server for `uri` (releasing the file for other processes); clients of
    this process still open on it fail afterwards."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # pragma: no cover
        return
    with _guard:
        _users.pop(os.path.abspath(uri), None)
        server_manager_instance.release_server(uri)


def _held_elsewhere(uri: str) -> bool:
    """Whether another process holds the milvus-lite file's lock (this process's own server does not count)."""
    try:
        from milvus_lite.server_manager import server_manager_instance

        if os.path.abspath(uri) in getattr(server_manager_instance, "_servers", {}):
            return False
    except ImportError:
        return False
    lock = Path(uri) / "LOCK"
    if not lock.is_file():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


_trips = threading.local()


def thread_round_trips() -> int:
    """Read requests this thread has sent through `Reloading` clients (a question runs in one thread, so the
    difference around a step is that step's round trips to the engine)."""
    return getattr(_trips, "n", 0)


class Reloading:
    """A client whose reads load the collection again when the server lost its loaded state (a restarted
    Milvus or milvus-lite server starts with every collection released), then retry once; it counts the
    read requests per thread (`thread_round_trips`)."""

    _READS = {"query", "search", "hybrid_search", "query_iterator", "get"}

    def __init__(self, client) -> None:
        self._client = client

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if name not in self._READS:
            return attr

        def call(collection, *args, **kwargs):
            _trips.n = getattr(_trips, "n", 0) + 1
            try:
                return attr(collection, *args, **kwargs)
            except Exception as exc:
                if "load()" not in str(exc) and "not loaded" not in str(exc):
                    raise
                self._client.load_collection(collection)
                return attr(collection, *args, **kwargs)
        return call
