"""One writer per index folder: an advisory `flock` on `<index>/.lock`, waited for or refused.

`flock` locks belong to an open file description, so two builders in the same
process (two threads) exclude each other as two processes do, and the kernel
releases the lock when its holder dies (kill -9 leaves no stale lock). The
holder's pid and start time are written into the file for the error message.
"""

from __future__ import annotations

import fcntl
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from ragsieve.tools.errors import UsageError

LOCK_FILE = ".lock"
POLL_S = 0.05


class IndexBusyError(UsageError):
    """Another builder holds the index's write lock and the wait ran out."""


class IndexLock:
    """Exclusive write lock on an index folder; `timeout_s` 0 refuses at once, None waits for ever."""

    def __init__(self, root: str | Path, timeout_s: float | None = 300.0) -> None:
        if timeout_s is not None and timeout_s < 0:
            raise UsageError(f"lock timeout must be >= 0 seconds (or None to wait), got {timeout_s}")
        self.root = Path(root)
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def acquire(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if self.timeout_s is not None and waited >= self.timeout_s:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise IndexBusyError(
                        f"index {self.root} is being written by another build ({holder}); waited "
                        f"{waited:.1f}s (lock wait {self.timeout_s:g}s: set index.lock_wait_s or --lock-wait)"
                    ) from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {datetime.now(timezone.utc).isoformat(timespec='seconds')}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def __enter__(self) -> "IndexLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text or "holder unknown"
