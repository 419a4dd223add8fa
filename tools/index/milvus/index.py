"""Reading the `milvus` backend: an index served by Milvus (milvus-lite file, standalone, cluster or Zilliz).

`ragsieve.tools.index.milvus.publish` writes the collection (layout, BM25 input, the
atomic switch); this module reads it. BM25 and dense search run server-side,
and `hybrid_search` fuses both server-side with Milvus' rankers (`RRFRanker`, or
`WeightedRanker`, which normalises each list with arctan rather than min-max):
the retriever uses it when `retrieval.fusion_site` says so (see
`ragsieve.tools.index.query.retriever`). Metadata filters (`Where`) are evaluated by
Milvus as boolean expressions.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.backend import Backend
from ragsieve.tools.index.embedders import open_embedder
from ragsieve.tools.index.embedders.providers import EmbeddingProvider, placement_of
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.readers import ReaderLease
from ragsieve.tools.index.milvus.client import Client, Reloading, client_for, release_client, thread_round_trips
from ragsieve.tools.index.milvus.leases import hold
from ragsieve.tools.index.milvus.pointer import read_pointer, resolve_uri
from ragsieve.tools.index.milvus.rows import pointer_filter
from ragsieve.tools.index.milvus.search import MilvusBM25, MilvusDense
from ragsieve.tools.index.milvus.store import FIELDS, PAGE, MilvusStore, MilvusVectors, and_visible
from ragsieve.tools.index.row_meta import RowMetadata
from ragsieve.tools.index.search import npy
from ragsieve.tools.index.search.admitted import Admitted, AdmittedCache
from ragsieve.tools.index.search.where import Where

FILTER_CACHE_SIZE = 64
log = logging.getLogger(__name__)


class MilvusIndex:
    """An index folder whose live generation is served by Milvus (see the module doc)."""

    def __init__(
        self, root: Path, pointer: dict, manifest: dict, client: Client, embedder: EmbeddingProvider | None = None
    ) -> None:
        self.backend = Backend.MILVUS
        self.root, self.path, self.manifest, self.pointer = root, root, manifest, pointer
        self.client = client
        collection, n = pointer["collection"], int(pointer["rows"])
        self.visible = visible = pointer_filter(pointer)
        self.store = MilvusStore(client, collection, n, visible)
        stem = pointer.get("bm25", {}).get("stem", True) if pointer.get("bm25_input") == "pretokenized" else None
        self.bm25 = MilvusBM25(
            client, collection, stem, visible, identifiers=bool(pointer.get("bm25", {}).get("identifiers", False))
        )
        self.dense = MilvusDense(client, collection, visible)
        self.vectors = MilvusVectors(client, collection, n, int(pointer["dimension"]), visible)
        if pointer.get("sparse_file"):  # stable-rows collections: the generation's subset beside the pointer
            self.sparse_rows = npy.load(root / pointer["sparse_file"]).astype(int).tolist()
        else:  # collections published before: a flag per entity
            self.sparse_rows = sorted(
                r["row"] for r in client.query(collection, filter="sparse_flag == true", output_fields=["row"], limit=16384)
            )
        self.model_name: str = manifest["embedding"]["model"]
        self._embedder = embedder
        self.device = "auto"  # where a local model embeds queries (`open.open_index(device=...)`)
        self._lock = threading.Lock()
        self._lease: ReaderLease | None = None  # the generation's rows are kept until close() (`milvus.leases`)
        self._sources: list[str] | None = None
        self._filter_cache = AdmittedCache(FILTER_CACHE_SIZE)  # resolved filters (`admitted`)
        self._meta: RowMetadata | None = None  # each row's source and kind, written at publish (`row_meta`)
        self._meta_read = False

    @classmethod
    def open(cls, index_dir: str | Path, embedder: EmbeddingProvider | None = None, token: str | None = None) -> MilvusIndex:
        root = Path(index_dir)
        pointer, lease = hold(root, lambda: read_pointer(root))  # its generation is kept until close()
        gen = current_generation(root)
        manifest = read_manifest(gen) if gen is not None else {"embedding": {"model": ""}}
        try:
            client = client_for(resolve_uri(root, pointer["uri"]), token or os.environ.get("RAGSIEVE_MILVUS_TOKEN"), wait_s=10.0)
            if not client.has_collection(pointer["collection"]):
                raise IndexMissingError(
                    f"index {root}: Milvus collection {pointer['collection']} not found at "
                    f"{pointer['uri']}; publish again with `ragsieve migrate`"
                )
            client.load_collection(pointer["collection"])
            index = cls(root, pointer, manifest, Reloading(client), embedder)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        index._lease = lease
        return index

    def __len__(self) -> int:
        return self.store.count()

    def _model(self) -> EmbeddingProvider:
        with self._lock:
            if self._embedder is None:
                self._embedder = open_embedder(
                    self.manifest["embedding"],  # the provider that built the index
                    device=self.device,
                )
            return self._embedder

    def embedding_placement(self) -> str:
        """Which encoder embeds this index's queries, on which device (the retrieve step's trace)."""
        return placement_of(self._model())

    def embed_query(self, text: str) -> np.ndarray:
        return self._model().embed([text])[0]

    @property
    def symbols(self) -> None:
        """Milvus keeps no symbol table: symbol lookups are a local index's (the retriever skips them)."""
        return None

    def row_metadata(self) -> RowMetadata | None:
        """Each row's source and kind from the file the publish wrote beside the pointer (read once), or None
        for a pointer published before it (or an unreadable file: the collection is read instead)."""
        with self._lock:
            if not self._meta_read:
                name = self.pointer.get("meta_file")
                if name:
                    try:
                        self._meta = RowMetadata.load(self.root / name, int(self.pointer["rows"]))
                    except (OSError, ValueError, KeyError) as exc:
                        log.warning("index %s: %s unreadable (%s): filters are resolved by Milvus", self.root, name, exc)
                self._meta_read = True
            return self._meta

    def filter_rows(self, where: Where) -> list[int]:
        """The rows a metadata filter admits, evaluated by Milvus (`Where.milvus_expr`), page by page."""
        return self.admitted(where).tolist()

    def admitted(self, where: Where) -> Admitted:
        """The rows a filter admits with the expression that admitted them (`Admitted.expr`), cached per filter
        and access labels version (the pointer, so the generation's rows, is fixed)."""
        grant, readable, key = None, None, where.model_dump_json()
        if where.readers is not None:  # the caller's principals against the index's access labels
            from ragsieve.tools.access.labels import load

            labels = load(self.root)
            grant, key = labels.grant(where.readers), f"{key} {labels.version}"
        cached = self._filter_cache.get(key)
        if cached is not None:
            return cached
        if grant is not None:  # resolved to the sources the caller may read
            readable = [s for s in self.sources() if grant(s)]
        expr = where.milvus_expr(readable)
        n = len(self)
        meta = self.row_metadata() if expr else None
        if meta is not None:  # resolved from the publish's row file, as a local index resolves it
            tenant = str(self.pointer.get("tenant", "default"))
            return self._filter_cache.put(
                key,
                Admitted(
                    meta.rows_where(
                        lambda source, kind: where.matches(source, kind, tenant) and (grant is None or grant(source))
                    ),
                    n,
                    expr,
                ),
            )
        rows: list[int] = []
        for start in range(0, n, PAGE) if expr else ():
            found = self.client.query(
                self.pointer["collection"],
                output_fields=["row"],
                limit=PAGE,
                filter=and_visible(f"row >= {start} and row < {start + PAGE} and ({expr})", self.visible),
            )
            rows.extend(int(r["row"]) for r in found)
        return self._filter_cache.put(key, Admitted(rows if expr else range(n), n, expr or None))

    def lexical_within(self, query: str, admitted: Admitted, k: int) -> list[tuple[int, float]]:
        """BM25 top `k` among the admitted rows (`MilvusBM25.search`: whole-collection statistics)."""
        return self.bm25.search(query, k, admitted.tolist())

    def dense_within(self, vector: np.ndarray, admitted: Admitted, k: int) -> list[tuple[int, float]]:
        """Dense top `k` among the admitted rows (`MilvusDense.search_admitted`: the filter's own expression)."""
        return self.dense.search_admitted(vector, admitted, k)

    def sources(self) -> list[str]:
        """Every document source of the live generation (read once, page by page; the pointer is fixed)."""
        cached = self._sources
        meta = self.row_metadata() if cached is None else None
        if meta is not None:
            cached = self._sources = list(meta.sources)  # sorted, one per document source
        if cached is None:
            found: set[str] = set()
            for start in range(0, len(self), PAGE):
                page = self.client.query(
                    self.pointer["collection"],
                    output_fields=["source"],
                    limit=PAGE,
                    filter=and_visible(f"row >= {start} and row < {start + PAGE}", self.visible),
                )
                found.update(str(r["source"]) for r in page)
            cached = self._sources = sorted(found)
        return list(cached)

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
    ) -> list[tuple]:
        """BM25 top `candidate_k` and dense top `candidate_k` fused by Milvus (one `hybrid_search` call):
        (row, score) pairs, or with `payload` (row, score, chunk, vector), all from that one request.

        fusion "rrf": `RRFRanker(rrf_k)`, sum of 1 / (rrf_k + rank) as the local RRF; Milvus has no per-list
        weights for it, so unequal weights are refused. fusion "weighted": `WeightedRanker(w_bm25, w_dense)`
        with Milvus' score normalisation (arctan), not the local min-max one: rankings can differ."""
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        w_bm25, w_dense = weights
        if fusion == "rrf" and w_bm25 != w_dense:
            raise UsageError(
                "Milvus' RRF ranker has no per-list weights: use equal bm25/dense weights, "
                'weighted fusion, or retrieval.fusion_site = "client"'
            )
        text = self.bm25.query_text(bm25_query)
        vec = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        limit = min(candidate_k, 16384)
        vis = {"expr": self.visible} if self.visible else {}
        reqs = [AnnSearchRequest(data=[vec], anns_field="dense", param={"metric_type": "IP"}, limit=limit, **vis)]
        if text.strip():
            reqs.insert(0, AnnSearchRequest(data=[text], anns_field="bm25", param={"metric_type": "BM25"}, limit=limit, **vis))
        if fusion == "rrf":
            ranker = RRFRanker(rrf_k)
        elif len(reqs) == 2:
            ranker = WeightedRanker(w_bm25, w_dense)
        else:
            ranker = WeightedRanker(w_dense)
        found = self.client.hybrid_search(
            self.pointer["collection"],
            reqs,
            ranker,
            limit=min(k, 16384),
            output_fields=FIELDS + ["dense"] if payload else ["row"],
        )
        hits = found[0] if found else []
        out: list[tuple]
        if payload:
            out = [
                (
                    int(h["entity"]["row"]),
                    float(h["distance"]),
                    MilvusStore._chunk(h["entity"]),
                    np.asarray(h["entity"]["dense"], dtype=np.float32),
                )
                for h in hits
            ]
        else:
            out = [(int(h["entity"]["row"]), float(h["distance"])) for h in hits]
        return sorted(out, key=lambda p: (-p[1], p[0]))

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._model().embed(texts)

    def round_trips(self) -> int:
        """Requests this thread has sent to Milvus so far (the plan runner records each step's difference in
        the trace as `index_round_trips`; fused retrieval is one `hybrid_search` where the server can)."""
        return thread_round_trips()

    def close(self) -> None:
        lease = self._lease
        if lease is not None:  # publishes may now expire what this generation showed (`milvus.leases`)
            self._lease = None
            lease.release()
        try:
            release_client(getattr(self.client, "_client", self.client), resolve_uri(self.root, self.pointer["uri"]))
        except Exception:  # pragma: no cover - closing is best effort
            pass

    def __enter__(self) -> "MilvusIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
