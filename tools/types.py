"""Typed records shared by every tool: documents, chunks and scored hits."""
from __future__ import annotations

from pydantic import BaseModel, Field


class Document(BaseModel):
    """One source document before chunking.

    `line_start` is the 1-based line of `text`'s first line in the source file
    (text and code); `None` for sources without lines (BEIR records).
    """

    doc_id: str
    source: str
    title: str = ""
    text: str
    kind: str = "text"  # text | markdown | html | code | beir
    content_hash: str = ""
    line_start: int | None = 1
    # heading lines of extracted web text: (char offset, anchor or "", heading); chunks cite source#anchor
    sections: list[tuple[int, str, str]] = Field(default_factory=list)


class Chunk(BaseModel):
    """A contiguous, non-overlapping piece of one document."""

    doc_id: str
    chunk_index: int
    text: str
    source: str
    title: str = ""
    kind: str = "text"
    line_start: int | None = None
    line_end: int | None = None

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.chunk_index}"

    @property
    def symbol(self) -> str | None:
        """The enclosing symbols of a code chunk (`Class.method`), kept in its title as `file (Class.method)`."""
        if self.kind != "code" or not self.title.endswith(")") or " (" not in self.title:
            return None
        return self.title[self.title.rindex(" (") + 2:-1] or None

    def label(self) -> str:
        """The citation: `path:start-end (Class.method)`, `page.html#anchor` or the source."""
        return citation_label(self.source, self.line_start, self.line_end, self.symbol)


def citation_label(source: str, line_start: int | None, line_end: int | None, symbol: str | None) -> str:
    where = source
    if line_start is not None:
        where += f":{line_start}" + (f"-{line_end}" if line_end and line_end != line_start else "")
    return f"{where} ({symbol})" if symbol else where


class Hit(BaseModel):
    """A chunk with the scores and ranks that put it in a result list.

    `row` is the chunk's position in the index (the order shared by the chunk
    store, BM25 and FAISS). Ranks are 1-based; `None` means that retriever did
    not return the chunk.
    """

    chunk: Chunk
    row: int
    score: float
    rank: int = 0
    bm25_score: float | None = None
    bm25_rank: int | None = None
    dense_score: float | None = None
    dense_rank: int | None = None
    extra: dict[str, float] = Field(default_factory=dict)

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id
