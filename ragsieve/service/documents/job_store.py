"""Job state every worker process can answer for: `<data-dir>/jobs.sqlite` (WAL, one row per job).

`ragsieve serve --workers N` runs N processes over one data folder; a job
runs in the process that accepted it, but `GET /v1/jobs/{id}` may reach any of
them, so each change of a job's state is written here (one atomic `INSERT OR
REPLACE`). A job whose process is gone (a restart, a crash) is reported as
`failed` with the reason, not as forever `running`.

`claim(key)` hands a piece of work to exactly one live process: at start-up
every worker sees the files a restart interrupted, and only the first to claim
one ingests it again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

KEEP_JOBS = 1000  # finished jobs remembered
BUSY_MS = 10_000
UNFINISHED = ("queued", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, owner INTEGER NOT NULL, status TEXT NOT NULL,
                                 updated REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_updated ON jobs(updated);
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner INTEGER NOT NULL);
"""


def alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class JobStore:
    """The jobs table of one data folder; safe to use from several threads and processes."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / "jobs.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def put(self, job: dict) -> None:
        body = json.dumps(job, ensure_ascii=False, default=str)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO jobs (id, owner, status, updated, body) VALUES (?, ?, ?, ?, ?)",
                (job["id"], os.getpid(), job["status"], time.time(), body),
            )

    def get(self, job_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT owner, status, body FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        owner, status, body = row
        job = json.loads(body)
        if status in UNFINISHED and not alive(owner):
            job |= {
                "status": "failed",
                "error": f"the server process that ran this job ({owner}) stopped before "
                f"it finished; files in vector stores are ingested again at start-up",
            }
        return job

    def prune(self, keep: int = KEEP_JOBS) -> None:
        """Forget the oldest finished jobs beyond `keep`."""
        with self._lock:
            self._db.execute(
                "DELETE FROM jobs WHERE status NOT IN ('queued', 'running') AND id NOT IN "
                "(SELECT id FROM jobs ORDER BY updated DESC LIMIT ?)",
                (keep,),
            )

    def claim(self, key: str) -> bool:
        """True when this process now owns `key`: nobody had it, or its owner's process is gone."""
        me = os.getpid()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT owner FROM claims WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] != me and alive(row[0]):
                    return False
                self._db.execute("INSERT OR REPLACE INTO claims (key, owner) VALUES (?, ?)", (key, me))
                return True
            finally:
                self._db.execute("COMMIT")

    def release(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, os.getpid()))

    def close(self) -> None:
        with self._lock:
            self._db.close()
