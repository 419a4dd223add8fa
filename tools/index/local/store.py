"""SQLite chunk store: the row order shared by BM25 and FAISS lives here.

Row r (0..N-1) of the store is row r of the BM25 index and of the FAISS index
/ `vectors.npy`. Chunks are keyed by (doc_id, chunk_index); a fresh build puts a
document's chunks in consecutive rows, an incremental one keeps unchanged rows
where they were (`ragsieve.tools.index.building.layout`), so readers order a document's
chunks by `chunk_index`, never by row; `documents.first_row` is its lowest row.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.local.store_schema import COLS, OLD_COLS, SCHEMA, SHARED_SCHEMA
from ragsieve.tools.types import Chunk


def text_hash(text: str) -> str:
    """sha1 of the UTF-8 text: lets callers find a chunk by its exact text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def shared_store_of(gen: Path) -> tuple[Path, int, int] | None:
    """(shared store file, generation number, rows) of an incremental generation folder, or None."""
    try:
        manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    store = manifest.get("store") if isinstance(manifest, dict) else None
    if not isinstance(store, dict) or "/" in str(store.get("file", "/")):
        return None
    try:
        number = int(gen.name.split("-")[1])  # this generation's number (`store.generation`: the store's first)
    except (IndexError, ValueError):
        return None
    return gen.parent / store["file"], number, int(manifest["counts"]["chunks"])


def _to_chunk(r: tuple) -> Chunk:
    return Chunk(
        doc_id=r[0],
        chunk_index=r[1],
        text=r[2],
        source=r[3],
        title=r[4],
        kind=r[5],
        line_start=r[6],
        line_end=r[7],
        symbol=r[8] or "",
    )


class ChunkStore:
    """Chunks and documents of one index generation in `path` (a SQLite file).

    `read_only=True` (used when loading an index) opens the file with
    `mode=ro` and fails with IndexMissingError when it does not exist or is
    not a readable chunk store (checked on open, one line naming the file).
    """

    def __init__(
        self, path: str | Path, read_only: bool = False, generation: int | None = None, count: int | None = None
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if generation is None and read_only and not self.path.is_file():
            shared = shared_store_of(self.path.parent)  # `<gen>/chunks.sqlite` of an incremental generation
            if shared is not None:
                self.path, generation, count = shared
        self.generation = generation
        # shared store (`ragsieve.tools.index.local.segments` layout): rows carry the generations that added and
        # retired them; generation G sees born <= G and not retired by G
        self._vis = (
            "" if generation is None else f" AND born <= {int(generation)} AND (retired = 0 OR retired > {int(generation)})"
        )
        if read_only:
            if not self.path.is_file():
                raise IndexMissingError(f"chunk store not found: {self.path}")
            try:
                if generation is None:
                    self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
                else:  # WAL readers need the shared-memory file; `query_only` keeps them readers
                    self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                    self._db.execute("PRAGMA query_only = 1")
                self._db.execute("SELECT doc_id, chunk_index, row, text FROM chunks LIMIT 1").fetchall()
                self._db.execute("SELECT doc_id, content_hash, first_row FROM documents LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise IndexMissingError(
                    f"chunk store {self.path} is damaged or not a ragsieve chunk store "
                    f"({exc}); rebuild with `ragsieve index ... --rebuild`"
                ) from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            if generation is None:
                self._db.executescript(SCHEMA)
            else:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.executescript(SHARED_SCHEMA)
        self._count: int | None = count
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(chunks)")}
        self._cols = COLS if "symbol" in columns else OLD_COLS  # an index written before symbols existed
        if generation is None and "born" in columns:
            raise IndexMissingError(f"chunk store {self.path} is shared by generations: open it with one")

    # -- writing -----------------------------------------------------------
    def add_document(
        self, doc_id: str, source: str, content_hash: str, chunks: Sequence[Chunk], rows: Sequence[int] | None = None
    ) -> list[int]:
        """Store one document's chunks at `rows` (default: the next rows); returns those rows."""
        if self.read_only:
            raise UsageError(f"chunk store {self.path} is open read-only")
        given = rows is not None and len(rows) > 0  # rows given: no count needed (an O(N) scan of a shared store)
        first = 0 if given else self.count()
        rows = list(range(first, first + len(chunks))) if rows is None else [int(r) for r in rows]
        if len(rows) != len(chunks):
            raise UsageError(f"{len(chunks)} chunks of {doc_id} but {len(rows)} rows")
        born = () if self.generation is None else (self.generation,)
        extra, marks = ("", "") if self.generation is None else (", born", ", ?")
        self._db.execute(
            f"INSERT INTO documents (doc_id, source, content_hash, n_chunks, first_row{extra}) VALUES (?, ?, ?, ?, ?{marks})",
            (doc_id, source, content_hash, len(chunks), min(rows, default=first), *born),
        )
        self._db.executemany(
            f"INSERT INTO chunks (doc_id, chunk_index, row, text, text_hash, source, title, kind, line_start, "
            f"line_end, symbol{extra}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{marks})",
            [
                (
                    c.doc_id,
                    c.chunk_index,
                    r,
                    c.text,
                    text_hash(c.text),
                    c.source,
                    c.title,
                    c.kind,
                    c.line_start,
                    c.line_end,
                    c.symbol,
                    *born,
                )
                for r, c in zip(rows, chunks)
            ],
        )
        self._count = None if given else first + len(chunks)
        return rows

    def drop_documents(self, doc_ids: Sequence[str]) -> None:
        """Delete these documents and their chunks (a shared store retires them in this generation instead:
        older generations still see them)."""
        for start in range(0, len(doc_ids), 500):
            part = list(doc_ids[start : start + 500])
            marks = ",".join("?" * len(part))
            for table in ("chunks", "documents"):
                if self.generation is None:
                    self._db.execute(f"DELETE FROM {table} WHERE doc_id IN ({marks})", part)
                else:
                    self._db.execute(
                        f"UPDATE {table} SET retired = {int(self.generation)} WHERE doc_id IN ({marks}){self._vis}", part
                    )
        self._count = None

    def move_rows(self, moves: dict[int, int]) -> None:
        """Renumber rows old -> new (targets must be free) and keep each document's `first_row` its lowest row."""
        if not moves:
            return
        if self.generation is not None:
            self._move_shared(moves, self.generation)
            return
        self._db.executemany("UPDATE chunks SET row = ? WHERE row = ?", [(n, o) for o, n in moves.items()])
        docs = sorted(
            {
                d
                for (d,) in self._db.execute(
                    f"SELECT DISTINCT doc_id FROM chunks WHERE row IN ({','.join(str(int(n)) for n in moves.values())})"
                )
            }
        )
        self._db.executemany(
            "UPDATE documents SET first_row = (SELECT MIN(row) FROM chunks "
            "WHERE chunks.doc_id = documents.doc_id) WHERE doc_id = ?",
            [(d,) for d in docs],
        )

    def _move_shared(self, moves: dict[int, int], generation: int) -> None:
        """A shared store moves a chunk by retiring its record and adding a copy at the new row."""
        g = int(generation)
        cols = "doc_id, chunk_index, text, text_hash, source, title, kind, line_start, line_end, symbol"
        docs = set()
        for old, new in moves.items():
            doc = self._db.execute(f"SELECT doc_id FROM chunks WHERE row = ?{self._vis}", (int(old),)).fetchone()
            self._db.execute(
                f"INSERT INTO chunks ({cols}, row, born) SELECT {cols}, ?, ? FROM chunks WHERE row = ?{self._vis}",
                (int(new), g, int(old)),
            )
            self._db.execute(f"UPDATE chunks SET retired = ? WHERE row = ? AND born < ?{self._vis}", (g, int(old), g))
            docs.add(doc[0])
        for d in sorted(docs):
            first = self._db.execute(f"SELECT MIN(row) FROM chunks WHERE doc_id = ?{self._vis}", (d,)).fetchone()[0]
            self._db.execute(
                "INSERT INTO documents (doc_id, source, content_hash, n_chunks, first_row, born) "
                f"SELECT doc_id, source, content_hash, n_chunks, ?, ? FROM documents WHERE doc_id = ?"
                f"{self._vis}",
                (first, g, d),
            )
            self._db.execute(f"UPDATE documents SET retired = ? WHERE doc_id = ? AND born < ?{self._vis}", (g, d, g))

    def forget_after(self, generation: int) -> int:
        """Undo what builds that never became current wrote (rows born, or retirements, after `generation`):
        a build killed between its commit and the switch of CURRENT. Returns the rows touched."""
        g = int(generation)
        done = 0
        for table in ("chunks", "documents"):
            done += self._db.execute(f"DELETE FROM {table} WHERE born > ?", (g,)).rowcount
            done += self._db.execute(f"UPDATE {table} SET retired = 0 WHERE retired > ?", (g,)).rowcount
        self._db.commit()
        return done

    def collect(self, oldest: int) -> int:
        """Delete the records no generation from `oldest` on sees (retired at or before it)."""
        done = sum(
            self._db.execute(f"DELETE FROM {t} WHERE retired > 0 AND retired <= ?", (int(oldest),)).rowcount
            for t in ("chunks", "documents")
        )
        self._db.commit()
        return done

    def commit(self) -> None:
        self._db.commit()

    # -- reading -----------------------------------------------------------
    def count(self) -> int:
        if self._count is None:
            self._count = self._db.execute(f"SELECT COUNT(*) FROM chunks WHERE 1{self._vis}").fetchone()[0]
        return self._count

    def get(self, row: int) -> Chunk:
        r = self._db.execute(f"SELECT {self._cols} FROM chunks WHERE row = ?{self._vis}", (int(row),)).fetchone()
        if r is None:
            raise UsageError(f"row {row} not in the chunk store (0..{self.count() - 1})")
        return _to_chunk(r)

    def get_many(self, rows: Iterable[int]) -> list[Chunk]:
        """Chunks of `rows`, in the order given (duplicates allowed)."""
        wanted = [int(r) for r in rows]
        found: dict[int, Chunk] = {}
        unique = sorted(set(wanted))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            for r in self._db.execute(f"SELECT row, {self._cols} FROM chunks WHERE row IN ({marks}){self._vis}", part):
                found[r[0]] = _to_chunk(r[1:])
        missing = [r for r in unique if r not in found]
        if missing:
            raise UsageError(f"rows {missing[:5]} not in the chunk store (0..{self.count() - 1})")
        return [found[r] for r in wanted]

    def row_of(self, doc_id: str, chunk_index: int) -> int | None:
        r = self._db.execute(
            f"SELECT row FROM chunks WHERE doc_id = ? AND chunk_index = ?{self._vis}", (doc_id, int(chunk_index))
        ).fetchone()
        return None if r is None else r[0]

    def row_of_text(self, text: str) -> int | None:
        """Lowest row whose chunk text equals `text` exactly, or None."""
        r = self._db.execute(
            f"SELECT MIN(row) FROM chunks WHERE text_hash = ? AND text = ?{self._vis}", (text_hash(text), text)
        ).fetchone()
        return None if r is None else r[0]

    def neighbours(self, row: int, radius: int = 1) -> list[int]:
        """Rows of the same document within `radius` chunks of `row` (by chunk_index), in document order,
        `row` excluded."""
        if radius < 0:
            raise UsageError(f"neighbour radius must be >= 0, got {radius}")
        r = self._db.execute(f"SELECT doc_id, chunk_index FROM chunks WHERE row = ?{self._vis}", (int(row),)).fetchone()
        if r is None:
            raise UsageError(f"row {row} not in the chunk store")
        return [
            x[0]
            for x in self._db.execute(
                f"SELECT row FROM chunks WHERE doc_id = ? AND chunk_index BETWEEN ? AND ? AND row != ?{self._vis} "
                "ORDER BY chunk_index",
                (r[0], r[1] - radius, r[1] + radius, int(row)),
            )
        ]

    def doc_rows(self, doc_id: str) -> list[int]:
        return [
            x[0] for x in self._db.execute(f"SELECT row FROM chunks WHERE doc_id = ?{self._vis} ORDER BY chunk_index", (doc_id,))
        ]

    def texts(self) -> list[str]:
        return [x[0] for x in self._db.execute(f"SELECT text FROM chunks WHERE 1{self._vis} ORDER BY row")]

    def documents(self) -> dict[str, str]:
        """doc_id -> content_hash."""
        return dict(self._db.execute(f"SELECT doc_id, content_hash FROM documents WHERE 1{self._vis} ORDER BY first_row"))

    def document_rows(self) -> dict[str, tuple[int, int]]:
        """doc_id -> (first_row, n_chunks)."""
        return {
            d: (f, n)
            for d, f, n in self._db.execute(
                f"SELECT doc_id, first_row, n_chunks FROM documents WHERE 1{self._vis} ORDER BY first_row"
            )
        }

    def row_metadata(self) -> list[tuple[int, str, str]]:
        """(row, source, kind) of every chunk, in row order: what metadata filters read."""
        return [
            (int(r), s, k)
            for r, s, k in self._db.execute(f"SELECT row, source, kind FROM chunks WHERE 1{self._vis} ORDER BY row")
        ]

    def symbol_chunks(self) -> list[tuple[int, Chunk]]:
        """(row, chunk) of the chunks that can define a symbol (`ragsieve.tools.index.search.symbols.definitions_in`:
        code, or a page section labelled `#anchor`), in row order; a prose corpus reads none."""
        which = "(kind = 'code' OR symbol LIKE '#%')" if self._cols == COLS else "kind = 'code'"
        return [
            (r[0], _to_chunk(r[1:]))
            for r in self._db.execute(f"SELECT row, {self._cols} FROM chunks WHERE {which}{self._vis} ORDER BY row")
        ]

    def source_of(self, doc_id: str) -> str:
        r = self._db.execute(f"SELECT source FROM documents WHERE doc_id = ?{self._vis}", (doc_id,)).fetchone()
        return r[0] if r else doc_id

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        return [
            _to_chunk(r)
            for r in self._db.execute(
                f"SELECT {self._cols} FROM chunks WHERE doc_id = ?{self._vis} ORDER BY chunk_index", (doc_id,)
            )
        ]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ChunkStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
