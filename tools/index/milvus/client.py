"""Opening and closing Milvus clients, with milvus-lite's one-process-per-file rule made explicit.

milvus-lite runs an in-process server per file and holds a `flock` on
`<file>/LOCK` until that server stops: while another process has the file open
(a build, `ragsieve serve`, a reader), nothing else can open it. But that server
is a gRPC server on loopback: the process that starts it records its port beside
the file (`<file>.endpoint.json`), and `client_for` in another process connects
to it there instead of opening the file, as clients of a Milvus server do. This
is what lets `ragsieve index` publish a one-document change in seconds while
`ragsieve serve` holds a large milvus-lite index open: milvus-lite reads a whole
collection into memory when a process first touches it (O(corpus): 40-150 s
and ~3 GB at 1M chunks here), which the holder has already paid. When the holder
cannot be reached, `client_for` waits up to `wait_s` for the file, then fails
with `IndexBusyError` saying so (a CLI process releases the file when it exits;
`stop_lite_server` releases it from a long-lived one).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.index.local.lock import IndexBusyError

log = logging.getLogger(__name__)

# a pymilvus.MilvusClient, or a `Reloading` around one: pymilvus comes with the optional milvus extra
Client = Any

_users: dict[str, int] = {}  # milvus-lite file -> open clients of this process
_guard = threading.Lock()
POLL_S = 0.5
ENDPOINT = ".endpoint.json"  # `<file>.endpoint.json`: {"pid", "port"} of the process serving the file


def is_lite(uri: str) -> bool:
    return "://" not in uri


def client_for(uri: str, token: str | None = None, wait_s: float | None = 0.0) -> Client:
    """A client for `uri`; a milvus-lite file held by another process is waited for `wait_s` seconds
    (None: for ever), then refused with `IndexBusyError`."""
    MilvusClient = require(Extra.MILVUS, "pymilvus", "the milvus backend").MilvusClient
    started = time.monotonic()
    while is_lite(uri) and _held_elsewhere(uri):
        shared = _holder_client(uri, token)
        if shared is not None:
            return shared
        waited = time.monotonic() - started
        if wait_s is not None and waited >= wait_s:
            raise IndexBusyError(
                f"the milvus-lite file {uri} is open in another process (a build, `ragsieve "
                f"serve` or a reader); waited {waited:.1f}s. milvus-lite serves one process at a "
                f"time: stop the other one, or publish to a Milvus server"
            ) from None
        time.sleep(POLL_S)
    key = os.path.abspath(uri)
    with _guard:  # counted before it opens: a concurrent release cannot stop the server under it
        try:
            client = MilvusClient(uri=uri, token=token or "")
        except Exception as exc:  # pymilvus raises MilvusException / ConnectionError variants
            raise IndexMissingError(f"cannot reach Milvus at {uri}: {type(exc).__name__}: {str(exc)[:200]}") from None
        if is_lite(uri):
            _users[key] = _users.get(key, 0) + 1
            _record_endpoint(uri)
    return client


def _endpoint_file(uri: str) -> Path:
    return Path(os.path.abspath(uri) + ENDPOINT)


def _record_endpoint(uri: str) -> None:
    """Say where this process serves the milvus-lite file `uri` (loopback port), for other processes."""
    try:
        from milvus_lite.server_manager import server_manager_instance

        entry = server_manager_instance._servers.get(os.path.abspath(uri))
        if entry is None:
            return
        target = _endpoint_file(uri)
        if _read_endpoint(uri) == {"pid": os.getpid(), "port": int(entry[2])}:
            return
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "port": int(entry[2])}), encoding="utf-8")
        os.replace(tmp, target)
    except (ImportError, AttributeError, OSError, IndexError, TypeError) as exc:  # sharing is an optimisation
        log.debug("milvus-lite endpoint for %s not recorded: %s", uri, exc)


def _read_endpoint(uri: str) -> dict | None:
    try:
        found = json.loads(_endpoint_file(uri).read_text(encoding="utf-8"))
        return {"pid": int(found["pid"]), "port": int(found["port"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _holder_client(uri: str, token: str | None) -> Client | None:
    """A client of the milvus-lite server another (live) process runs for `uri`, or None."""
    from pymilvus import MilvusClient

    found = _read_endpoint(uri)
    if found is None or found["pid"] == os.getpid():
        return None
    try:
        os.kill(found["pid"], 0)
    except OSError:  # the recorded holder is gone (its lock went with it)
        return None
    try:
        client = MilvusClient(uri=f"http://127.0.0.1:{found['port']}", token=token or "", timeout=5)
        client.list_collections()
    except Exception as exc:  # not (or no longer) serving: wait for the file as before
        log.debug("milvus-lite server of process %s for %s unreachable: %s", found["pid"], uri, exc)
        return None
    client._ragsieve_shared = True  # another process's server: release_client counts nothing down
    log.info("milvus-lite file %s is open in process %s: using its server on 127.0.0.1:%s", uri, found["pid"], found["port"])
    return client


def release_client(client: Client, uri: str) -> None:
    """Close `client`. This process's milvus-lite server for the file keeps running (and the file locked) until
    the process exits or `stop_lite_server` is called: stopping it while pymilvus keeps pooled connections to it
    left collections released under other clients of this process (measured: milvus-lite 3.2.2)."""
    try:
        client.close()
    except Exception:  # pragma: no cover - closing is best effort
        pass
    if is_lite(uri) and not getattr(client, "_ragsieve_shared", False):
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
        if (_read_endpoint(uri) or {}).get("pid") == os.getpid():
            _endpoint_file(uri).unlink(missing_ok=True)
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

    def __init__(self, client: Client) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in self._READS:
            return attr

        def call(collection: str, *args: Any, **kwargs: Any) -> Any:
            _trips.n = getattr(_trips, "n", 0) + 1
            try:
                return attr(collection, *args, **kwargs)
            except Exception as exc:
                if "load()" not in str(exc) and "not loaded" not in str(exc):
                    raise
                self._client.load_collection(collection)
                return attr(collection, *args, **kwargs)

        return call
