"""Answers given by the assistant and the feedback on them, in SQLite beside the server's data.

Every answer the chat page or widget receives is recorded (question as asked
and as searched, answer, citations, trace, index, plan, who asked: the page or
which widget key) under a random id the page holds; thumbs up/down with an
optional comment attach to that id, so feedback always carries what was
actually answered (a client cannot make up the answer it rates). Answers
without feedback are pruned after `keep_days` or beyond `max_unrated` rows.
One connection per call with WAL and a busy timeout: several `--workers`
processes may share the file. Like the question log, the file is created
readable by the server's user only (0600) and every text a user or the model
wrote (question, searched question, answer, history, comment, the trace's
texts) is redacted (`ragsieve.insights.redact`) before it is written;
document ids and sources are kept as they are.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from ragsieve.agent.errors import UsageError
from ragsieve.insights.redact import redact

FILE_NAME = "feedback.sqlite3"
MAX_COMMENT_CHARS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id TEXT PRIMARY KEY, created REAL NOT NULL, index_name TEXT NOT NULL, plan TEXT NOT NULL,
    asked TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, citations TEXT NOT NULL,
    trace TEXT NOT NULL, history TEXT NOT NULL, via TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback (
    answer_id TEXT PRIMARY KEY REFERENCES answers(id), created REAL NOT NULL,
    rating INTEGER NOT NULL CHECK (rating IN (-1, 1)), comment TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_created ON answers(created);
"""


class FeedbackStore:
    def __init__(self, path: str | Path, *, keep_days: float = 7.0, max_unrated: int = 10_000):
        self.path = Path(path)
        self.keep_days, self.max_unrated = keep_days, max_unrated
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():  # readable by the server's user only (SQLite's WAL files follow it)
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            with closing(self._connect()) as db, db:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"cannot open the feedback store {self.path}: {exc}") from None

    @classmethod
    def in_folder(cls, folder: str | Path) -> "FeedbackStore":
        return cls(Path(folder) / FILE_NAME)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10.0)
        db.execute("PRAGMA busy_timeout = 10000")
        return db

    def record_answer(
        self,
        *,
        index: str,
        plan: str,
        asked: str,
        question: str,
        answer: str,
        citations: list[dict],
        trace: list[dict],
        history: list[dict],
        via: str,
        answer_id: str | None = None,
    ) -> str:
        """Store an answer under `answer_id` (the question log's id for it; a new one when None)."""
        answer_id = answer_id or uuid.uuid4().hex
        now = time.time()
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    answer_id,
                    now,
                    index,
                    plan,
                    redact(asked),
                    redact(question),
                    redact(answer),
                    _dump(citations),
                    _dump(_redacted(trace)),
                    _dump(_redacted(history)),
                    via,
                ),
            )
            unrated = "id NOT IN (SELECT answer_id FROM feedback)"
            db.execute(f"DELETE FROM answers WHERE {unrated} AND created < ?", (now - self.keep_days * 86400,))
            db.execute(
                f"DELETE FROM answers WHERE {unrated} AND id IN (SELECT id FROM answers WHERE {unrated} "
                f"ORDER BY created DESC LIMIT -1 OFFSET ?)",
                (self.max_unrated,),
            )
        return answer_id

    def answer_index(self, answer_id: str) -> str | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT index_name FROM answers WHERE id = ?", (answer_id,)).fetchone()
        return row[0] if row else None

    def rate(self, answer_id: str, rating: int, comment: str = "") -> None:
        """Thumbs up (1) or down (-1) with a comment; rating again replaces the earlier rating."""
        if rating not in (-1, 1):
            raise UsageError("rating must be 1 (up) or -1 (down)")
        if len(comment) > MAX_COMMENT_CHARS:
            raise UsageError(f"the comment is {len(comment)} characters; the limit is {MAX_COMMENT_CHARS}")
        with closing(self._connect()) as db, db:
            db.execute("INSERT OR REPLACE INTO feedback VALUES (?, ?, ?, ?)", (answer_id, time.time(), rating, redact(comment)))

    def rated(self, index: str | None = None) -> list[dict[str, Any]]:
        """Every rated answer (oldest first) with its feedback: what `ragsieve feedback export` writes."""
        query = (
            "SELECT a.id, a.created, a.index_name, a.plan, a.asked, a.question, a.answer, a.citations, a.trace, "
            "a.history, a.via, f.created, f.rating, f.comment FROM answers a JOIN feedback f ON f.answer_id = a.id"
            + (" WHERE a.index_name = ?" if index else "")
            + " ORDER BY a.created"
        )
        with closing(self._connect()) as db:
            rows = db.execute(query, (index,) if index else ()).fetchall()
        keys = (
            "id",
            "created",
            "index",
            "plan",
            "asked",
            "question",
            "answer",
            "citations",
            "trace",
            "history",
            "via",
            "rated_at",
            "rating",
            "comment",
        )
        out = []
        for row in rows:
            item = dict(zip(keys, row))
            for k in ("citations", "trace", "history"):
                item[k] = json.loads(item[k])
            out.append(item)
        return out


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


KEPT = frozenset({"chunk_id", "chunk_ids", "source", "sources", "doc_id", "step", "outcome", "role"})


def _redacted(value: Any, key: str = "") -> Any:
    """`value` with every string redacted, but for document ids and sources (`KEPT` keys), which are not
    what a user wrote and which the export must name as they are."""
    if key in KEPT:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, key) for v in value]
    return value
