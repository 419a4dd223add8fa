"""Rows of a Milvus-served index read back by row number: chunks, documents, neighbours and dense vectors,
each restricted to the published generation (see `ragsieve.tools.index.milvus.index`)."""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.local.store import text_hash
from ragsieve.tools.index.milvus.client import Client
from ragsieve.tools.types import Chunk

FIELDS = [
    "row",
    "doc_id",
    "chunk_index",
    "text",
    "source",
    "title",
    "kind",
    "line_start",
    "line_end",
    "symbol",
    "text_hash",
    "doc_hash",
]
PAGE = 16000  # rows per query page (Milvus caps a query's limit at 16,384)


def _quote(value: str) -> str:
    return json.dumps(value)  # a Milvus filter string literal: double quotes, backslash escapes


def rows_in(rows: Sequence[int]) -> str:
    return f"row in [{', '.join(str(int(r)) for r in rows)}]"


def and_visible(expr: str | None, visible: str | None) -> str:
    """`expr` restricted to the published generation (`milvus.rows.pointer_filter`); "" means everything."""
    parts = [p for p in (expr, visible) if p]
    return " and ".join(f"({p})" for p in parts) if len(parts) > 1 else (parts[0] if parts else "")


class MilvusStore:
    def __init__(self, client: Client, collection: str, count: int, visible: str | None = None) -> None:
        self.client, self.collection, self._count, self.visible = client, collection, count, visible

    def _query(self, expr: str, limit: int | None = None, fields: list[str] = FIELDS) -> list[dict]:
        kwargs = {"limit": limit} if limit else {}
        return self.client.query(self.collection, filter=and_visible(expr, self.visible), output_fields=fields, **kwargs)

    @staticmethod
    def _chunk(r: dict) -> Chunk:
        return Chunk(
            doc_id=r["doc_id"],
            chunk_index=r["chunk_index"],
            text=r["text"],
            source=r["source"],
            title=r["title"],
            kind=r["kind"],
            symbol=r["symbol"],
            line_start=None if r["line_start"] < 0 else r["line_start"],
            line_end=None if r["line_end"] < 0 else r["line_end"],
        )

    def count(self) -> int:
        return self._count

    def get(self, row: int) -> Chunk:
        return self.get_many([row])[0]

    def get_many(self, rows: Sequence[int]) -> list[Chunk]:
        wanted = [int(r) for r in rows]
        found: dict[int, Chunk] = {}
        unique = sorted(set(wanted))
        for start in range(0, len(unique), 1000):
            for r in self._query(rows_in(unique[start : start + 1000]), limit=1000):
                found[r["row"]] = self._chunk(r)
        missing = [r for r in unique if r not in found]
        if missing:
            raise UsageError(f"rows {missing[:5]} not in the Milvus collection {self.collection}")
        return [found[r] for r in wanted]

    def doc_rows(self, doc_id: str) -> list[int]:
        found = self._query(f"doc_id == {_quote(doc_id)}", 16384, ["row", "chunk_index"])
        return [r["row"] for r in sorted(found, key=lambda r: r["chunk_index"])]

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        return self.get_many(self.doc_rows(doc_id))

    def neighbours(self, row: int, radius: int = 1) -> list[int]:
        doc = self._query(f"row == {int(row)}", 1, ["doc_id", "chunk_index"])
        if not doc:
            return []
        at = int(doc[0]["chunk_index"])
        near = self._query(
            f"doc_id == {_quote(doc[0]['doc_id'])} and chunk_index >= {at - radius} "
            f"and chunk_index <= {at + radius} and row != {int(row)}",
            2 * radius + 1,
            ["row", "chunk_index"],
        )
        return [r["row"] for r in sorted(near, key=lambda r: r["chunk_index"])]

    def row_of_text(self, text: str) -> int | None:
        found = self._query(f"text_hash == {_quote(text_hash(text))}", 16, ["row", "text"])
        rows = [r["row"] for r in found if r["text"] == text]
        return min(rows) if rows else None

    def documents(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for start in range(0, self._count, 16000):
            for r in sorted(
                self._query(f"row >= {start} and row < {start + 16000}", 16000, ["row", "doc_id", "doc_hash"]),
                key=lambda r: r["row"],
            ):
                out.setdefault(r["doc_id"], r["doc_hash"])
        return out


class MilvusVectors:
    """`vectors[row]`, `vectors[[rows]]`, `vectors[a:b]`, `len(vectors)`, `np.asarray(vectors)` (all: calibration
    and the conformal step's whole-corpus view)."""

    def __init__(self, client: Client, collection: str, count: int, dimension: int, visible: str | None = None) -> None:
        self.client, self.collection, self._count, self.visible = client, collection, count, visible
        self.shape = (count, dimension)
        self.ndim = 2

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, key: int | np.integer | slice | Sequence[int]) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            return self._fetch([int(key)])[0]
        if isinstance(key, slice):
            key = range(*key.indices(self._count))
        return self._fetch([int(r) for r in key])

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        out = self._fetch(list(range(self._count)))
        return out.astype(dtype) if dtype is not None else out

    def _fetch(self, rows: list[int]) -> np.ndarray:
        found: dict[int, list[float]] = {}
        unique = sorted(set(rows))
        for start in range(0, len(unique), 1000):
            expr = and_visible(rows_in(unique[start : start + 1000]), self.visible)
            for r in self.client.query(self.collection, filter=expr, output_fields=["row", "dense"], limit=1000):
                found[r["row"]] = r["dense"]
        return np.asarray([found[r] for r in rows], dtype=np.float32).reshape(len(rows), self.shape[1])
