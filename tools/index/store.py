"""SQLite chunk store: the row order shared by BM25 and FAISS lives here.

Row r (0..N-1) of the store is row r of the BM25 index and of the FAISS index
/ `vectors.npy`. Chunks are keyed by (doc_id, chunk_index); a fresh build puts a
document's chunks in consecutive rows, an incremental one keeps unchanged rows
where they were (`ragsieve.tools.index.layout`), so readers order a document's
chunks by `chunk_index`, never by row; `documents.first_row` is its lowest row.
"""
from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.types import Chunk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    doc_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    row INTEGER NOT NULL UNIQUE,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    kind TEXT NOT NULL,
    line_start INTEGER,
    line_end INTEGER,
    symbol TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (doc_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    first_row INTEGER NOT NULL
);
"""
_COLS = "doc_id, chunk_index, text, source, title, kind, line_start, line_end, symbol"
_OLD_COLS = "doc_id, chunk_index, text, source, title, kind, line_start, line_end, '' AS symbol"  # before `symbol`


def text_hash(text: str) -> str:
    """sha1 of the UTF-8 text: lets callers find a chunk by its exact text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _to_chunk(r: tuple) -> Chunk:
    return Chunk(doc_id=r[0], chunk_index=r[1], text=r[2], source=r[3], title=r[4], kind=r[5],
                 line_start=r[6], line_end=r[7], symbol=r[8] or "")


class ChunkStore:
    """Chunks and documents of one index generation in `path` (a SQLite file).

    `read_only=True` (used when loading an index) opens the file with
    `mode=ro` and fails with IndexMissingError when it does not exist or is
    not a readable chunk store (checked on open, one line naming the file).
    """

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            if not self.path.is_file():
                raise IndexMissingError(f"chunk store not found: {self.path}")
            try:
                self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                           check_same_thread=False)
                self._db.execute("SELECT doc_id, chunk_index, row, text FROM chunks LIMIT 1").fetchall()
                self._db.execute("SELECT doc_id, content_hash, first_row FROM documents LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise IndexMissingError(f"chunk store {self.path} is damaged or not a ragsieve chunk store "
                                        f"({exc}); rebuild with `ragsieve index ... --rebuild`") from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.executescript(_SCHEMA)
        self._count: int | None = None
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(chunks)")}
        self._cols = _COLS if "symbol" in columns else _OLD_COLS  # an index written before symbols existed

    # -- writing -----------------------------------------------------------
    def add_document(self, doc_id: str, source: str, content_hash: str, chunks: Sequence[Chunk],
                     rows: Sequence[int] | None = None) -> list[int]:
        """Store one document's chunks at `rows` (default: the next rows); returns those rows."""
        if self.read_only:
            raise UsageError(f"chunk store {self.path} is open read-only")
        first = self.count()
        rows = list(range(first, first + len(chunks))) if rows is None else [int(r) for r in rows]
        if len(rows) != len(chunks):
            raise UsageError(f"{len(chunks)} chunks of {doc_id} but {len(rows)} rows")
        self._db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
                         (doc_id, source, content_hash, len(chunks), min(rows, default=first)))
        self._db.executemany(
            "INSERT INTO chunks (doc_id, chunk_index, row, text, text_hash, source, title, kind, line_start, "
            "line_end, symbol) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(c.doc_id, c.chunk_index, r, c.text, text_hash(c.text), c.source, c.title, c.kind,
              c.line_start, c.line_end, c.symbol) for r, c in zip(rows, chunks)])
        self._count = first + len(chunks)
        return rows

    def drop_documents(self, doc_ids: Sequence[str]) -> None:
        """Delete these documents and their chunks (an incremental generation edits a copy of the last one)."""
        for start in range(0, len(doc_ids), 500):
            part = list(doc_ids[start:start + 500])
            marks = ",".join("?" * len(part))
            self._db.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", part)
            self._db.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", part)
        self._count = None

    def move_rows(self, moves: dict[int, int]) -> None:
        """Renumber rows old -> new (targets must be free) and keep each document's `first_row` its lowest row."""
        if not moves:
            return
        self._db.executemany("UPDATE chunks SET row = ? WHERE row = ?", [(n, o) for o, n in moves.items()])
        docs = sorted({d for (d,) in self._db.execute(
            f"SELECT DISTINCT doc_id FROM chunks WHERE row IN ({','.join(str(int(n)) for n in moves.values())})")})
        self._db.executemany("UPDATE documents SET first_row = (SELECT MIN(row) FROM chunks "
                             "WHERE chunks.doc_id = documents.doc_id) WHERE doc_id = ?", [(d,) for d in docs])

    def commit(self) -> None:
        self._db.commit()

    # -- reading -----------------------------------------------------------
    def count(self) -> int:
        if self._count is None:
            self._count = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return self._count

    def get(self, row: int) -> Chunk:
        r = self._db.execute(f"SELECT {self._cols} FROM chunks WHERE row = ?", (int(row),)).fetchone()
        if r is None:
            raise UsageError(f"row {row} not in the chunk store (0..{self.count() - 1})")
        return _to_chunk(r)

    def get_many(self, rows: Iterable[int]) -> list[Chunk]:
        """Chunks of `rows`, in the order given (duplicates allowed)."""
        wanted = [int(r) for r in rows]
        found: dict[int, Chunk] = {}
        unique = sorted(set(wanted))
        for start in range(0, len(unique), 500):
            part = unique[start:start + 500]
            marks = ",".join("?" * len(part))
            for r in self._db.execute(f"SELECT row, {self._cols} FROM chunks WHERE row IN ({marks})", part):
                found[r[0]] = _to_chunk(r[1:])
        missing = [r for r in unique if r not in found]
        if missing:
            raise UsageError(f"rows {missing[:5]} not in the chunk store (0..{self.count() - 1})")
        return [found[r] for r in wanted]

    def row_of(self, doc_id: str, chunk_index: int) -> int | None:
        r = self._db.execute("SELECT row FROM chunks WHERE doc_id = ? AND chunk_index = ?",
                             (doc_id, int(chunk_index))).fetchone()
        return None if r is None else r[0]

    def row_of_text(self, text: str) -> int | None:
        """Lowest row whose chunk text equals `text` exactly, or None."""
        r = self._db.execute("SELECT MIN(row) FROM chunks WHERE text_hash = ? AND text = ?",
                             (text_hash(text), text)).fetchone()
        return None if r is None else r[0]

    def neighbours(self, row: int, radius: int = 1) -> list[int]:
        """Rows of the same document within `radius` chunks of `row` (by chunk_index), in document order,
        `row` excluded."""
        if radius < 0:
            raise UsageError(f"neighbour radius must be >= 0, got {radius}")
        r = self._db.execute("SELECT doc_id, chunk_index FROM chunks WHERE row = ?", (int(row),)).fetchone()
        if r is None:
            raise UsageError(f"row {row} not in the chunk store")
        return [x[0] for x in self._db.execute(
            "SELECT row FROM chunks WHERE doc_id = ? AND chunk_index BETWEEN ? AND ? AND row != ? "
            "ORDER BY chunk_index", (r[0], r[1] - radius, r[1] + radius, int(row)))]

    def doc_rows(self, doc_id: str) -> list[int]:
        return [x[0] for x in self._db.execute(
            "SELECT row FROM chunks WHERE doc_id = ? ORDER BY chunk_index", (doc_id,))]

    def texts(self) -> list[str]:
        return [x[0] for x in self._db.execute("SELECT text FROM chunks ORDER BY row")]

    def documents(self) -> dict[str, str]:
        """doc_id -> content_hash."""
        return dict(self._db.execute("SELECT doc_id, content_hash FROM documents ORDER BY first_row"))

    def document_rows(self) -> dict[str, tuple[int, int]]:
        """doc_id -> (first_row, n_chunks)."""
        return {d: (f, n) for d, f, n in self._db.execute(
            "SELECT doc_id, first_row, n_chunks FROM documents ORDER BY first_row")}

    def row_metadata(self) -> list[tuple[int, str, str]]:
        """(row, source, kind) of every chunk, in row order: what metadata filters read."""
        return [(int(r), s, k) for r, s, k in self._db.execute("SELECT row, source, kind FROM chunks ORDER BY row")]

    def source_of(self, doc_id: str) -> str:
        r = self._db.execute("SELECT source FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return r[0] if r else doc_id

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        return [_to_chunk(r) for r in self._db.execute(
            f"SELECT {self._cols} FROM chunks WHERE doc_id = ? ORDER BY chunk_index", (doc_id,))]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ChunkStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
