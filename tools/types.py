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
    # where a page, cell or section starts: (char offset in `text`, label), sorted; a chunk is cited with the
    # label in force at its first character (`#anchor` of a web page, `p. 3` of a PDF, `cell 4` of a notebook)
    locators: list[tuple[int, str]] = Field(default_factory=list)
    # who may read it, from its own front matter (`access:`); None: it says nothing (`ragsieve.tools.access`)
    access: tuple[str, ...] | None = None


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
    symbol: str = ""  # code: the definitions around or in the chunk (`Session.request`), else ""

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.chunk_index}"


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
