"""The embedded local LLM: assemble a packaged GGUF once, serve it in-process with llama.cpp.

Named models are assembled from PyPI part packages by `ragsieve.agent.llm.model_packages`
(`resolve_local_model`). `LocalLLMServer` runs
`xllamacpp.Server` (llama.cpp's OpenAI-compatible HTTP server) on 127.0.0.1.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from ragsieve.agent.errors import ModelUnavailableError, UsageError
from ragsieve.tools.extras import Extra, require

log = logging.getLogger(__name__)

_START_LOCK = threading.Lock()
PROMPT_BATCH = 512  # tokens per prompt batch (llama.cpp's n_batch; its default 2048 reports progress rarely)
WARM_UP_S = 60.0


def default_threads(load: float | None = None) -> int:
    """The usable cores that other work leaves idle: cores minus the 1-minute load average (rounded),
    at least 1, at most all cores. Measured on 2 idle cores (879-token prompt, 96 generated): 12.7 s
    with 2 threads, 22.1 s with 1; on a busy 2-core machine (load 9-16) all cores made the model
    slower than one thread (443 s against a median of 212 s), because llama.cpp's spinning workers
    slow down many-fold when other work oversubscribes the cores. `[llm] n_threads` sets it."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform
            load = 0.0
    return max(1, min(cores, cores - int(round(load))))


class LocalLLMServer:
    """llama.cpp's OpenAI-compatible server, in-process, on 127.0.0.1 (a free port).

    `base_url` ends in /v1. `embeddings=True` also serves `/v1/embeddings` (llama.cpp's `--embeddings`).
    `n_threads` None: `default_threads()` (the cores the machine's load leaves idle). `warm_up` answers
    one tiny request before the server counts as started (`warm`), so the first real question does not
    pay for paging the weights in. Stop it with `close()` (or `with`); it also stops at exit."""

    def __init__(
        self,
        gguf_path: str | os.PathLike[str],
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_parallel: int = 2,
        start_timeout_s: float = 120.0,
        embeddings: bool = False,
        warm_up: bool = True,
    ) -> None:
        path = Path(gguf_path).expanduser()
        if not path.is_file():
            raise ModelUnavailableError(f"GGUF model file not found: {path}")
        if n_ctx < 256:
            raise UsageError(f"invalid n_ctx {n_ctx!r}: must be >= 256")
        if n_threads is not None and n_threads < 1:
            raise UsageError(f"invalid n_threads {n_threads!r}: must be >= 1 or None (usable cores - 1)")
        if n_parallel < 1:
            raise UsageError(f"invalid n_parallel {n_parallel!r}: must be >= 1")
        xllamacpp = require(
            Extra.LOCAL, "xllamacpp", "the embedded LLM", "or point llm.base_url / OPENAI_BASE_URL at an OpenAI-compatible server"
        )
        self.gguf_path = path
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = n_parallel
        self.n_threads = n_threads if n_threads is not None else default_threads()
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.n_batch = PROMPT_BATCH  # a progress event per batch while a long prompt is read
        if embeddings:  # also serve /v1/embeddings (mean-pooled hidden states, unit length), as `--embeddings`
            params.embedding = True
            params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        params.hostnames = ["127.0.0.1"]
        params.verbosity = -1  # llama.cpp logs errors only
        started = time.monotonic()
        params.port = 0  # llama.cpp binds a free port itself (no pick-then-bind race)
        with _START_LOCK:  # one model load at a time in this process
            try:
                self._server = xllamacpp.Server(params)
            except Exception as exc:  # xllamacpp raises plain RuntimeError/ValueError on load failures
                raise ModelUnavailableError(f"llama.cpp could not start with {path}: {exc}") from exc
        address = str(self._server.listening_address).rstrip("/")
        if "://" not in address:
            address = f"http://{address}"
        self.address = address
        self.port = urlparse(address).port or 0
        self.base_url = f"{address}/v1"
        atexit.register(self.close)
        try:
            _wait_ready(self.address, start_timeout_s)
        except BaseException:
            self.close()
            raise
        if warm_up:
            warm(self.address)
        self.startup_s = time.monotonic() - started
        log.info(
            "local LLM %s serving at %s with %d threads (started in %.1fs)",
            path.name,
            self.base_url,
            self.n_threads,
            self.startup_s,
        )

    def close(self) -> None:
        server = getattr(self, "_server", None)
        if server is None:
            return
        self._server = None
        atexit.unregister(self.close)
        del server  # xllamacpp stops the HTTP server and frees the model when the Server is deallocated
        deadline = time.monotonic() + 10.0
        while _port_in_use(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _port_in_use(self.port):
            log.warning("local LLM port %d still answers after close()", self.port)

    @property
    def running(self) -> bool:
        return getattr(self, "_server", None) is not None

    def __enter__(self) -> "LocalLLMServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def warm(address: str, timeout_s: float = WARM_UP_S) -> bool:
    """Send one tiny completion (2 tokens) so the weights are paged in and the compute graph is built
    before a user's request arrives; False (logged, not raised) when it fails or takes over `timeout_s`."""
    body = json.dumps(
        {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2, "temperature": 0, "cache_prompt": False}
    ).encode()
    request = urllib.request.Request(f"{address}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    started = time.monotonic()
    try:
        with opener.open(request, timeout=timeout_s) as response:
            response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.warning("local LLM warm-up at %s failed (%s); the first question will be slower", address, exc)
        return False
    log.info("local LLM warmed up in %.1fs", time.monotonic() - started)
    return True


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_ready(address: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    while time.monotonic() < deadline:
        try:
            with opener.open(f"{address}/health", timeout=2.0) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise ModelUnavailableError(f"local LLM at {address} not ready after {timeout_s:g}s (last: {last})")
