"""What the pipeline needs from an index, whichever engine holds it (`local` or `milvus`).

`IndexBackend` names the whole surface the retriever, the steps, calibration
and evaluation use; `HybridIndex` (SQLite + bm25s + FAISS in one process) is
the `local` backend, `MilvusIndex` the distributed one. Rows are integers
0..N-1 in both: a document's chunks occupy consecutive rows.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Protocol, Sequence

import numpy as np

from ragsieve.tools.types import Chunk


class Backend(str, Enum):
    LOCAL = "local"
    MILVUS = "milvus"


class ChunkSource(Protocol):
    def count(self) -> int: ...
    def get(self, row: int) -> Chunk: ...
    def get_many(self, rows: Sequence[int]) -> list[Chunk]: ...
    def doc_rows(self, doc_id: str) -> list[int]: ...
    def chunks_of(self, doc_id: str) -> list[Chunk]: ...
    def neighbours(self, row: int, radius: int = 1) -> list[int]: ...
    def row_of_text(self, text: str) -> int | None: ...
    def documents(self) -> dict[str, str]: ...


class LexicalSearch(Protocol):
    def search(self, query: str, k: int = 10, rows: list[int] | None = None) -> list[tuple[int, float]]: ...
    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray: ...


class VectorSearch(Protocol):
    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]: ...
    def search_rows(self, vector: np.ndarray, rows: list[int], k: int = 10) -> list[tuple[int, float]]: ...


class IndexBackend(Protocol):
    """`store` (chunks by row, by document, neighbours), `bm25` and `dense` (search, also restricted to rows),
    `vectors` (indexable by a row or a list of rows), `sparse_rows` (COS-Mix S), `embed_query` / `embed`
    (the index's own embedding model), `manifest` and `root` (the index folder)."""

    store: ChunkSource
    bm25: LexicalSearch
    dense: VectorSearch
    vectors: Any
    sparse_rows: list[int]
    manifest: dict
    backend: Backend

    def __len__(self) -> int: ...
    def embed_query(self, text: str) -> np.ndarray: ...
    def embed(self, texts: list[str]) -> np.ndarray: ...
    def embedding_placement(self) -> str: ...
    def close(self) -> None: ...


def placement_of(embedder) -> str:
    """What embeds queries, for the trace: `<encoder> on <device>` for a local model, else the provider."""
    from ragsieve.tools.index.dense import Embedder
    from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
    from ragsieve.tools.index.embedders.providers import provider_of

    if isinstance(embedder, (Embedder, OpenAIEmbedder)):
        return embedder.placement
    return f"{provider_of(embedder)} ({embedder.encoder})"


def open_index(index_dir, embedder=None, device: str = "auto"):
    """The index in `index_dir` with the backend it was published to (`<index>/milvus.json`), else local;
    a local model embeds its queries on `device` (`ragsieve.tools.index.device`)."""
    from pathlib import Path

    from ragsieve.tools.index.hybrid import HybridIndex

    if (Path(index_dir) / "milvus.json").is_file():
        from ragsieve.tools.index.milvus import MilvusIndex

        index = MilvusIndex.open(index_dir, embedder=embedder)
        index.device = device
        return index
    return HybridIndex.open(index_dir, embedder=embedder, device=device)
