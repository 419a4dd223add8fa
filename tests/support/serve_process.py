"""`ragsieve serve` as a child process: a free loopback port, a wait until `/readyz` answers 200, and a cleanup that
also ends the worker processes of `--workers N` (the server runs in its own process group)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(base: str, proc: subprocess.Popen[str], timeout_s: float = 180) -> None:
    """Until `base/readyz` answers 200; fails at once, with the server's stderr, when the server has exited."""
    client = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10)
    ends = time.monotonic() + timeout_s
    with client:
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"ragsieve serve exited with {proc.returncode} before it was ready: {err}")
            try:
                if client.get(base + "/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < ends, f"ragsieve serve was not ready at {base} within {timeout_s} s"
            time.sleep(0.2)


@contextmanager
def serve_process(
    index: Path | str, *args: str, env: dict[str, str], stderr: int | None = subprocess.PIPE
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`ragsieve serve --index demo=INDEX --port P ARGS…` ready on 127.0.0.1; yields the process and its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "ragsieve", "serve", "--index", f"demo={index}", "--port", str(port), *args]
    proc = subprocess.Popen(command, env=env, stderr=stderr, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc)
        yield proc, base
    finally:
        try:  # the server and its worker processes, also when a failed check skipped the test's own SIGTERM
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
