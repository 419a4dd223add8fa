"""Reader leases on index generations: a generation a reader holds is never deleted under it.

A reader (a running server answering from `gen-3`) holds a shared `flock` on
`gen-3/.readers`. A builder that would delete old generations first tries an
exclusive, non-blocking lock on that file: a generation some reader holds is
left in place, and whoever drops the last lease later removes it (`remove_unless_read`;
a build's `generations.sweep`).
`flock` locks belong to the open file, so they work across processes and the
kernel drops them when a reader dies (no stale lease survives a kill -9).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

READERS = ".readers"


class ReaderLease:
    """A shared lock on `<generation>/.readers` held until `release()`."""

    def __init__(self, gen: Path) -> None:
        self.gen = Path(gen)
        self._fd: int | None = None
        try:
            fd = os.open(self.gen / READERS, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only index folder: no lease, the builder's own rule still applies
            log.warning("no reader lease on %s (%s): a concurrent build may delete it", self.gen, exc)
            return
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def in_use(gen: Path) -> bool:
    """True when some reader (in any process) holds a lease on `gen`."""
    path = Path(gen) / READERS
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def remove_unless_read(gen: Path) -> bool:
    """Delete `gen` when no reader holds it; True when it was deleted."""
    if in_use(gen):
        log.info("generation %s is still read: left for its last reader", gen)
        return False
    shutil.rmtree(gen, ignore_errors=True)
    return True
