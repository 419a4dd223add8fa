"""What the pipeline needs from an index, whichever engine holds it (`local` or `milvus`).

`IndexBackend` names the whole surface the retriever, the steps, calibration
and evaluation use; `HybridIndex` (SQLite + bm25s + FAISS in one process,
`ragsieve.tools.index.local`) is the `local` backend, `MilvusIndex`
(`ragsieve.tools.index.milvus.index`) the distributed one; `ragsieve.tools.index.engines.open`
opens either. This module is the contract only: it imports no engine. Rows are
integers 0..N-1 in both: a document's chunks occupy consecutive rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.modes import Backend
from ragsieve.tools.types import Chunk

if TYPE_CHECKING:  # named in signatures only: the contract stays free of the query room's imports
    from ragsieve.tools.index.search.admitted import Admitted
    from ragsieve.tools.index.search.symbols import SymbolTable
    from ragsieve.tools.index.search.where import Where


class ChunkSource(Protocol):
    def count(self) -> int: ...
    def get(self, row: int) -> Chunk: ...
    def get_many(self, rows: Sequence[int]) -> list[Chunk]: ...
    def doc_rows(self, doc_id: str) -> list[int]: ...
    def chunks_of(self, doc_id: str) -> list[Chunk]: ...
    def neighbours(self, row: int, radius: int = 1) -> list[int]: ...
    def row_of_text(self, text: str) -> int | None: ...
    def documents(self) -> dict[str, str]: ...


@runtime_checkable
class RowLookup(Protocol):
    """A chunk store that finds a row by (document, chunk number) without a scan (the local SQLite store)."""

    def row_of(self, doc_id: str, chunk_index: int) -> int | None: ...


class LexicalSearch(Protocol):
    def search(self, query: str, k: int = 10, rows: list[int] | None = None) -> list[tuple[int, float]]: ...
    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray: ...


@runtime_checkable
class CorpusScores(Protocol):
    """BM25 that scores every row at once (local BM25; Milvus ranks server-side and has no such array)."""

    def scores(self, query: str) -> np.ndarray: ...


class VectorSearch(Protocol):
    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]: ...
    def search_rows(self, vector: np.ndarray, rows: list[int], k: int = 10) -> list[tuple[int, float]]: ...


class VectorRows(Protocol):
    """The stored vectors: `vectors[row]` (1-D), `vectors[[rows]]` / `vectors[a:b]` (2-D), `len(vectors)`;
    a numpy array, or `MilvusVectors` fetching from the collection."""

    def __len__(self) -> int: ...
    def __getitem__(self, key: Any) -> Any: ...


@runtime_checkable
class IndexBackend(Protocol):
    """`store` (chunks by row, by document, neighbours), `bm25` and `dense` (search, also restricted to rows),
    `vectors` (indexable by a row or a list of rows; None only in a test double without vectors: the steps
    then score the hits they have), `sparse_rows` (COS-Mix S), `embed_query` / `embed` (the index's own
    embedding model), `manifest` and `root` (the index folder), `filter_rows` (a metadata filter's rows),
    `sources` (every document source of the live generation, sorted),
    and `symbols` (the code symbol table; None where the backend keeps none). Capabilities only some
    backends have are the runtime-checkable protocols `ServerFusion`, `RoundTrips`, `AdmittedSearch`,
    `CorpusScores` (of `bm25`) and `RowLookup` (of `store`)."""

    # read-only members (properties), so that a backend may hold a narrower type (e.g. `bm25: BM25Index`)
    @property
    def backend(self) -> Backend: ...
    @property
    def root(self) -> Path: ...
    @property
    def manifest(self) -> dict: ...
    @property
    def model_name(self) -> str: ...
    @property
    def store(self) -> ChunkSource: ...
    @property
    def bm25(self) -> LexicalSearch: ...
    @property
    def dense(self) -> VectorSearch: ...
    @property
    def vectors(self) -> VectorRows | None: ...
    @property
    def sparse_rows(self) -> list[int]: ...

    def __len__(self) -> int: ...
    def embed_query(self, text: str) -> np.ndarray: ...
    def embed(self, texts: list[str]) -> np.ndarray: ...
    def filter_rows(self, where: Where) -> list[int]: ...
    def sources(self) -> list[str]: ...
    @property
    def symbols(self) -> SymbolTable | None: ...
    def embedding_placement(self) -> str: ...
    def close(self) -> None: ...


def vectors_of(index: IndexBackend) -> VectorRows:
    """The index's stored vectors, refused with one line when it has none (dense retrieval needs them)."""
    if index.vectors is None:
        raise IndexMissingError("this index has no stored vectors: dense retrieval needs them (rebuild the index)")
    return index.vectors


@runtime_checkable
class AdmittedSearch(Protocol):
    """A backend that resolves a filter once into an `Admitted` set (cached per filter and access labels
    version) and searches BM25 and dense within it without a list of rows (the local backend)."""

    def admitted(self, where: Where) -> Admitted: ...
    def lexical_within(self, query: str, admitted: Admitted, k: int) -> list[tuple[int, float]]: ...
    def dense_within(self, vector: np.ndarray, admitted: Admitted, k: int) -> list[tuple[int, float]]: ...


@runtime_checkable
class RoundTrips(Protocol):
    """A remote backend that counts the requests it has sent for this thread (Milvus; the plan runner records
    each step's difference in the trace)."""

    def round_trips(self) -> int: ...


@runtime_checkable
class ServerFusion(Protocol):
    """A backend whose engine fuses BM25 and dense lists itself (Milvus `hybrid_search`)."""

    def hybrid_search(
        self,
        bm25_query: str,
        vector: np.ndarray,
        k: int,
        fusion: str,
        rrf_k: int = 60,
        weights: tuple[float, float] = (1.0, 1.0),
        candidate_k: int = 100,
        payload: bool = False,
    ) -> list[tuple]: ...
