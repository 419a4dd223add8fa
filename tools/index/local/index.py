"""Open the current generation of an index folder for searching.

Layout (written by `ragsieve.tools.index.building.builder.IndexBuilder`)::

    index_dir/CURRENT            one line: the name of the live generation, e.g. gen-3
    index_dir/gen-3/manifest.json, chunks.sqlite, bm25/, dense.faiss, vectors.npy, sparse.json

`CURRENT` is replaced atomically, so a reader sees either the old or the new
generation, never a half-written one. The builder keeps the generation it
replaced; should a reader still lose a race (two builds in a row while it
opens), `open` re-reads `CURRENT` and tries the new generation, a bounded
number of times. A damaged file gives one `IndexMissingError` line naming
the file, never a raw exception from the library that reads it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from ragsieve.tools.access.labels import load
from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.backend import Backend
from ragsieve.tools.index.embedders import known_dimension, mismatch, open_embedder, provider_of
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.providers import placement_of
from ragsieve.tools.index.local.generations import CURRENT, MANIFEST, current_generation, layout_of, read_manifest
from ragsieve.tools.index.local.readers import ReaderLease
from ragsieve.tools.index.local.segment_bm25 import SegmentBM25
from ragsieve.tools.index.local.segments import NumpyFlat, SegmentView
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.index.row_meta import RowMetadata
from ragsieve.tools.index.search.admitted import Admitted, AdmittedCache
from ragsieve.tools.index.search.bm25 import BM25Index
from ragsieve.tools.index.search.dense import DenseIndex
from ragsieve.tools.index.search.symbols import SymbolTable
from ragsieve.tools.index.search.where import Where

REQUIRED = (MANIFEST, "chunks.sqlite", "bm25", "dense.faiss", "vectors.npy", "sparse.json")
SEGMENTED_REQUIRED = (MANIFEST, "segments", "sparse.json")  # the incremental layout: chunks in a shared store


QUERY_CACHE_SIZE = 64
OPEN_ATTEMPTS = 5  # re-reads of CURRENT when the generation changed under an opening reader


T = TypeVar("T")


def _load_part(gen: Path, name: str, loader: Callable[[], T]) -> T:
    """Run one part's loader; any failure of the third-party reader becomes one clear line."""
    try:
        return loader()
    except (IndexMissingError, UsageError):
        raise
    except Exception as exc:  # faiss, numpy, bm25s, json and sqlite each raise their own types
        raise IndexMissingError(
            f"index generation {gen}: {name} is damaged ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else 'unreadable'}); "
            f"rebuild with `ragsieve index ... --rebuild`"
        ) from None


class HybridIndex:
    """Chunk store + BM25 + FAISS + vectors of one generation; open with `HybridIndex.open`."""

    def __init__(
        self,
        root: Path,
        path: Path,
        manifest: dict,
        store: ChunkStore,
        bm25: BM25Index,
        dense: DenseIndex,
        sparse_rows: list[int],
        embedder: Embedder | None = None,
        batch_size: int = 64,
    ) -> None:
        self.backend = Backend.LOCAL
        self.root, self.path, self.manifest = root, path, manifest
        self.store, self.bm25, self.dense = store, bm25, dense
        self.vectors: np.ndarray = dense.vectors
        self.sparse_rows = sparse_rows
        self.model_name: str = manifest["embedding"]["model"]
        self._embedder = embedder
        self.device = "auto"  # where a local model embeds queries (`open(device=...)`)
        self._batch_size = batch_size
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_lock = threading.Lock()
        self._filter_cache = AdmittedCache(QUERY_CACHE_SIZE)
        self._row_meta: RowMetadata | None = None
        self._symbols: SymbolTable | None = None
        self._lease: ReaderLease | None = None  # an incremental generation's records, held until close()
        self.segments: SegmentView | None = None  # the incremental layout's composed segments

    @classmethod
    def open(
        cls, index_dir: str | Path, embedder: Embedder | None = None, batch_size: int = 64, device: str = "auto"
    ) -> "HybridIndex":
        """Open the live generation of `index_dir`; queries are embedded on `device` (`auto`: a GPU torch sees).

        `embedder` (optional) shares an already loaded model; it must be the
        model the index was built with. Raises IndexMissingError when the
        folder, its CURRENT pointer or any part of the generation is missing.
        """
        root = Path(index_dir)
        if not root.is_dir():
            raise IndexMissingError(f"no index at {root}: the folder does not exist (build it with `ragsieve index`)")
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            gen = current_generation(root)
            if gen is None:
                raise IndexMissingError(f"no index at {root}: no {CURRENT} file (build it with `ragsieve index`)")
            try:
                index = cls._open_generation(root, gen, embedder, batch_size)
                index.device = device
                return index
            except IndexMissingError:
                if attempt == OPEN_ATTEMPTS or current_generation(root) == gen:
                    raise  # CURRENT did not move: the generation itself is broken
        raise AssertionError("unreachable")  # pragma: no cover

    @classmethod
    def _open_generation(cls, root: Path, gen: Path, embedder: Embedder | None, batch_size: int) -> "HybridIndex":
        if not gen.is_dir():
            raise IndexMissingError(f"index {root}: CURRENT points at {gen.name}, which does not exist")
        segmented = layout_of(gen) == "segments"
        missing = [name for name in (SEGMENTED_REQUIRED if segmented else REQUIRED) if not (gen / name).exists()]
        if missing:
            raise IndexMissingError(f"index generation {gen} is incomplete: missing {', '.join(missing)}")
        manifest = read_manifest(gen)
        why = (
            None
            if embedder is None
            else mismatch(manifest["embedding"], provider_of(embedder), embedder.name, known_dimension(embedder))
        )
        if why:
            raise UsageError(f"index {root}: {why}; queries must be embedded like the index (given embedder refused)")
        store = _load_part(gen, "chunks.sqlite", lambda: ChunkStore(gen / "chunks.sqlite", read_only=True))
        if segmented:
            try:
                return cls._open_segments(root, gen, manifest, store, embedder, batch_size)
            except BaseException:
                store.close()
                raise
        try:
            n = _load_part(gen, "chunks.sqlite", store.count)
            bm25 = _load_part(gen, "bm25/", lambda: BM25Index.load(gen / "bm25"))
            dense = _load_part(gen, "dense.faiss / vectors.npy", lambda: DenseIndex.load(gen))
            sparse = _load_part(
                gen,
                "sparse.json",
                lambda: [int(r) for r in json.loads((gen / "sparse.json").read_text(encoding="utf-8"))["rows"]],
            )
            if bm25.n_docs != n or len(dense) != n or dense.vectors.ndim != 2:
                raise IndexMissingError(
                    f"index generation {gen} is inconsistent: {n} chunks, "
                    f"{bm25.n_docs} BM25 rows, {len(dense)} vectors; rebuild with --rebuild"
                )
            if any(not 0 <= r < n for r in sparse):
                raise IndexMissingError(f"index generation {gen}: sparse.json names rows outside 0..{n - 1}")
        except BaseException:
            store.close()
            raise
        return cls(root, gen, manifest, store, bm25, dense, sparse, embedder, batch_size)

    @classmethod
    def _open_segments(
        cls, root: Path, gen: Path, manifest: dict, store: ChunkStore, embedder: Embedder | None, batch_size: int
    ) -> HybridIndex:
        """An incremental generation (`ragsieve.tools.index.building.incremental`): segments composed at open."""
        lease = ReaderLease(gen)  # records of the shared store stay while a reader holds its generation
        if not lease.held or not (gen / MANIFEST).is_file():
            lease.release()
            raise IndexMissingError(f"index generation {gen} was replaced while opening")
        try:
            index = cls._compose(root, gen, manifest, store, embedder, batch_size)
        except BaseException:
            lease.release()
            raise
        index._lease = lease
        return index

    @classmethod
    def _compose(
        cls, root: Path, gen: Path, manifest: dict, store: ChunkStore, embedder: Embedder | None, batch_size: int
    ) -> HybridIndex:
        n = int(manifest["counts"]["chunks"])
        view = _load_part(gen, "segments/", lambda: SegmentView(gen, manifest["segments"], n))
        vectors = _load_part(gen, "segments/ vectors", lambda: view.vectors)
        dense = DenseIndex("flat")
        dense._set(NumpyFlat(vectors), vectors)
        bm25 = SegmentBM25(view, manifest["bm25"])
        cut = _load_part(
            gen, "sparse.json", lambda: float(json.loads((gen / "sparse.json").read_text(encoding="utf-8"))["cutoff"])
        )
        sim = _load_part(gen, "segments/ nearest", lambda: view.nearest()[0])
        sparse = [] if n < 2 else np.flatnonzero(sim < cut).tolist()
        index = cls(root, gen, manifest, store, bm25, dense, sparse, embedder, batch_size)
        index.segments = view
        return index

    def __len__(self) -> int:
        return self.store.count()

    @property
    def embedder(self) -> Embedder:
        """The manifest's embedding provider and model (`ragsieve.tools.index.embedders`), opened on first use."""
        if self._embedder is None:
            self._embedder = open_embedder(self.manifest["embedding"], batch_size=self._batch_size, device=self.device)
        return self._embedder

    def embedding_placement(self) -> str:
        """Which encoder embeds this index's queries, on which device (the retrieve step's trace)."""
        return placement_of(self.embedder)

    def embed_query(self, text: str) -> np.ndarray:
        """The normalised query vector (1-D float32), a fresh copy each call.

        The last QUERY_CACHE_SIZE queries are remembered: one agentic question
        embeds the same question for retrieval, expansion, decoys, the fallback
        and the filters, and embedding dominates retrieval latency.
        """
        with self._query_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached.copy()
        vector = self.embedder.embed([text])[0]
        with self._query_lock:
            self._query_cache[text] = vector.copy()
            while len(self._query_cache) > QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        return vector

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    @property
    def symbols(self) -> SymbolTable:
        """The index's symbol table (`ragsieve.tools.index.search.symbols`), read from the chunk store on first use."""
        if self._symbols is None:
            table = SymbolTable.from_chunks(self.store.symbol_chunks())  # code and #anchor chunks only
            with self._query_lock:
                self._symbols = table
        return self._symbols

    def filter_rows(self, where: Where) -> list[int]:
        """The rows a metadata filter (`ragsieve.tools.index.search.where.Where`) admits; a local index is tenant
        `default`. Cached per filter: the chunk store of a generation never changes."""
        return self.admitted(where).tolist()

    def admitted(self, where: Where) -> Admitted:
        """The rows a filter admits as an `Admitted` set (sorted rows, mask, FAISS selector), resolved once per
        filter and access labels version (`<index>/access.json` re-read when it changes)."""
        grant = None
        key = where.model_dump_json()
        if where.readers is not None:  # the caller's principals against the index's access labels
            labels = load(self.root)
            grant, key = labels.grant(where.readers), f"{key} {labels.version}"
        cached = self._filter_cache.get(key)
        if cached is None:
            rows = self.row_metadata().rows_where(  # one check per (source, kind), not per chunk
                lambda source, kind: where.matches(source, kind, "default") and (grant is None or grant(source))
            )
            if where.symbol_kind:  # rows defining a symbol of that kind
                defining = self.symbols.rows_of_kind(where.symbol_kind)
                rows = rows[np.isin(rows, np.fromiter(defining, dtype=np.int64, count=len(defining)))]
            cached = self._filter_cache.put(key, Admitted(rows, len(self)))
        return cached

    def row_metadata(self) -> RowMetadata:
        """Each row's source and kind, read from the chunk store once (a generation's store never changes)."""
        if self._row_meta is None:
            meta = RowMetadata.from_rows(self.store.row_metadata())
            with self._query_lock:
                self._row_meta = meta
        return self._row_meta

    def sources(self) -> list[str]:
        """Every document source of the live generation, sorted (from `row_metadata`)."""
        return [str(s) for s in self.row_metadata().sources]

    def lexical_within(self, query: str, admitted: Admitted, k: int) -> list[tuple[int, float]]:
        """BM25 top `k` among the admitted rows (`BM25Index.search_admitted`)."""
        return self.bm25.search_admitted(query, k, admitted)

    def dense_within(self, vector: np.ndarray, admitted: Admitted, k: int) -> list[tuple[int, float]]:
        """Dense top `k` among the admitted rows (`DenseIndex.search_admitted`)."""
        return self.dense.search_admitted(vector, admitted, k)

    def close(self) -> None:
        self.store.close()
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def __enter__(self) -> "HybridIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
