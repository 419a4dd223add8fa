"""The question log: SQLite (WAL) beside the server's data, written by one background thread.

A question's record is queued (`submit`, a few microseconds on the request's
thread) and a single writer thread embeds the redacted questions in batches
with the index's own encoder and inserts them, one transaction per batch, so a
batch is written whole or not at all. Rows older than `retention_days` are
deleted (with `secure_delete`, so their bytes are overwritten) when the log
opens and at least every PRUNE_EVERY_S, and so are the oldest rows beyond
`max_rows` (checked whenever the rows written since the last count could
pass it), so the file is bounded by size as well as by age. The file is created on the first
write: a server with insights off never creates it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Callable

import numpy as np

from ragsieve.agent.errors import UsageError
from ragsieve.insights.record import Outcome, QuestionRecord, Surface

log = logging.getLogger(__name__)

FILE_NAME = "insights.sqlite3"
QUEUE_LIMIT = 10_000  # records waiting for the writer; beyond it a record is dropped (and counted)
BATCH = 256
PRUNE_EVERY_S = 3600.0
Embed = Callable[[list[str]], np.ndarray]

_COLUMNS = (
    "id",
    "index_name",
    "surface",
    "at",
    "plan",
    "outcome",
    "question",
    "latency_s",
    "asked",
    "low_confidence",
    "abstention",
    "evidence",
    "resolved",
    "score",
    "threshold",
    "qhat",
    "conformal_best",
    "citations",
    "answer",
    "rating",
    "vector",
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS questions (
    id TEXT PRIMARY KEY, index_name TEXT NOT NULL, surface TEXT NOT NULL, at REAL NOT NULL, plan TEXT NOT NULL,
    outcome TEXT NOT NULL, question TEXT NOT NULL, latency_s REAL NOT NULL, asked TEXT, low_confidence INTEGER NOT NULL,
    abstention TEXT, evidence TEXT, resolved INTEGER, score REAL, threshold REAL, qhat REAL, conformal_best REAL, citations TEXT NOT NULL,
    answer TEXT, rating INTEGER, vector BLOB
);
CREATE INDEX IF NOT EXISTS questions_at ON questions(index_name, at);
"""
_INSERT = f"INSERT OR REPLACE INTO questions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


class QuestionLog:
    """`submit` records, `rate` them when feedback arrives, `rows` reads them back; `close` flushes."""

    def __init__(
        self,
        path: str | Path,
        *,
        retention_days: float = 90.0,
        clock: Callable[[], float] = time.time,
        embedders: dict[str, Embed] | None = None,
        max_rows: int = 1_000_000,
    ):
        if retention_days <= 0:
            raise UsageError(f"insights retention_days must be > 0, got {retention_days}")
        if max_rows < 1:
            raise UsageError(f"insights max_rows must be >= 1, got {max_rows}")
        self.max_rows = max_rows
        self._rows_at_most = 0  # rows counted at the last prune plus those written since
        self.path = Path(path)
        self.retention_days, self.clock = retention_days, clock
        self.embedders: dict[str, Embed] = dict(embedders or {})
        self.dropped = 0
        self._queue: queue.Queue[tuple[str, object]] = queue.Queue(QUEUE_LIMIT)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._last_prune = 0.0
        if self.path.exists():
            self.prune()

    # -- writing -------------------------------------------------------------------------------------------
    def submit(self, record: QuestionRecord) -> None:
        """Queue `record` for the writer thread (never blocks: a full queue drops the record)."""
        self._put(("record", record))

    def rate(self, answer_id: str, rating: int) -> None:
        """Thumbs up (1) or down (-1) on a logged answer (queued like records, so it lands after its record)."""
        if rating not in (-1, 1):
            raise UsageError("rating must be 1 (up) or -1 (down)")
        self._put(("rate", (answer_id, rating)))

    def _put(self, item: tuple[str, object]) -> None:
        self._ensure_writer()
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            log.warning("the question log's queue is full; %d record(s) dropped so far", self.dropped)

    def _ensure_writer(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="ragsieve-insights-log", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            items = [item]
            while len(items) < BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(kind == "stop" for kind, _ in items)
            try:
                self._write_items([i for i in items if i[0] != "stop"])
            except Exception:  # the log never takes the service down; the next batch tries again
                log.exception("writing %d question-log item(s) failed", len(items))
            finally:
                for _ in items:
                    self._queue.task_done()
            if stop:
                return

    def _write_items(self, items: list[tuple[str, object]]) -> None:
        records = [r for kind, r in items if kind == "record" and isinstance(r, QuestionRecord)]
        self._embed(records)
        ratings = [(str(r[0]), int(r[1])) for kind, r in items if kind == "rate" and isinstance(r, tuple)]
        self.write(records, ratings)

    def _embed(self, records: list[QuestionRecord]) -> None:
        by_index: dict[str, list[QuestionRecord]] = {}
        for rec in records:
            if rec.vector is None and rec.index in self.embedders:
                by_index.setdefault(rec.index, []).append(rec)
        for index, recs in by_index.items():
            try:
                vectors = np.asarray(self.embedders[index]([r.question for r in recs]), dtype=np.float16)
            except Exception:  # no vector: the insights embed the question when they need it
                log.exception("embedding logged questions of %s failed", index)
                continue
            for rec, vec in zip(recs, vectors):
                rec.vector = vec.tobytes()

    def write(self, records: list[QuestionRecord], ratings: list[tuple[str, int]] | None = None) -> None:
        """Insert `records` and apply `ratings` in one transaction (the writer thread's, or a caller's own)."""
        if not records and not ratings:
            return
        with closing(self._connect()) as db, db:
            db.executemany(_INSERT, [_row(r) for r in records])
            db.executemany("UPDATE questions SET rating = ? WHERE id = ?", [(v, i) for i, v in ratings or []])
        self._rows_at_most += len(records)
        if self.clock() - self._last_prune >= PRUNE_EVERY_S or self._rows_at_most > self.max_rows:
            self.prune()

    def prune(self) -> int:
        """Delete rows older than the retention, then the oldest beyond `max_rows`; returns how many."""
        self._last_prune = self.clock()
        with closing(self._connect()) as db, db:
            gone = db.execute("DELETE FROM questions WHERE at < ?", (self.clock() - self.retention_days * 86400,)).rowcount
            gone += db.execute(
                "DELETE FROM questions WHERE id IN (SELECT id FROM questions ORDER BY at DESC LIMIT -1 OFFSET ?)",
                (self.max_rows,),
            ).rowcount
            self._rows_at_most = db.execute("SELECT COUNT(*) FROM questions").fetchone()[0]
        if gone:
            with closing(self._connect()) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return gone

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything submitted so far is written (bounded by `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self, timeout_s: float = 10.0) -> None:
        if self._thread is not None and self._thread.is_alive():
            try:
                self._queue.put(("stop", None), timeout=timeout_s)
            except queue.Full:
                log.warning("the question log could not be flushed within %.0f s", timeout_s)
                return
            self._thread.join(timeout_s)

    # -- reading -------------------------------------------------------------------------------------------
    def rows(self, index: str | None = None, since: float | None = None) -> list[QuestionRecord]:
        """Logged questions (oldest first) of `index` (all when None) asked at or after `since`."""
        if not self.path.exists():
            return []
        where: list[str] = []
        args: list[object] = []
        if index is not None:
            where.append("index_name = ?")
            args.append(index)
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        query = f"SELECT {', '.join(_COLUMNS)} FROM questions" + (" WHERE " + " AND ".join(where) if where else "")
        with closing(self._connect()) as db:
            return [_record(r) for r in db.execute(query + " ORDER BY at", args)]

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():  # what users asked: readable by the server's user only (WAL files follow)
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            db = sqlite3.connect(self.path, timeout=10.0)
            db.execute("PRAGMA busy_timeout = 10000")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA secure_delete = ON")
            db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"cannot open the question log {self.path}: {exc}") from None
        return db


def _row(r: QuestionRecord) -> tuple:
    return (
        r.id,
        r.index,
        r.surface.value,
        r.at,
        r.plan,
        r.outcome.value,
        r.question,
        r.latency_s,
        r.asked,
        int(r.low_confidence),
        r.abstention,
        r.evidence,
        None if r.resolved is None else int(r.resolved),
        r.score,
        r.threshold,
        r.qhat,
        r.conformal_best,
        json.dumps(r.citations, ensure_ascii=False),
        r.answer,
        r.rating,
        r.vector,
    )


def _record(row: tuple) -> QuestionRecord:
    v = dict(zip(_COLUMNS, row))
    return QuestionRecord(
        id=v["id"],
        index=v["index_name"],
        surface=Surface(v["surface"]),
        at=v["at"],
        plan=v["plan"],
        outcome=_outcome(v["outcome"], v["abstention"]),
        question=v["question"],
        latency_s=v["latency_s"],
        asked=v["asked"],
        low_confidence=bool(v["low_confidence"]),
        abstention=v["abstention"],
        evidence=v["evidence"],
        resolved=None if v["resolved"] is None else bool(v["resolved"]),
        score=v["score"],
        threshold=v["threshold"],
        qhat=v["qhat"],
        conformal_best=v["conformal_best"],
        citations=json.loads(v["citations"]),
        answer=v["answer"],
        rating=v["rating"],
        vector=v["vector"],
    )


def _outcome(logged: str, abstention: str | None) -> Outcome:
    """A row's outcome; rows logged before strict abstentions were counted say `answered` with abstention
    `ungrounded`: they are read as the abstentions they were."""
    outcome = Outcome(logged)
    return Outcome.ABSTAINED_UNGROUNDED if outcome is Outcome.ANSWERED and abstention == "ungrounded" else outcome


def vector_of(record: QuestionRecord) -> np.ndarray | None:
    return None if record.vector is None else np.frombuffer(record.vector, dtype=np.float16).astype(np.float32)
