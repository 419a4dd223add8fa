"""Reading the `milvus` backend: an index served by Milvus (milvus-lite file, standalone, cluster or Zilliz).

`ragsieve.tools.index.milvus_publish` writes the collection (layout, BM25 input, the
atomic switch); this module reads it. BM25 and dense search run server-side,
and `hybrid_search` fuses both server-side with Milvus' rankers (`RRFRanker`, or
`WeightedRanker`, which normalises each list with arctan rather than min-max):
the retriever uses it when `retrieval.fusion_site` says so (see
`ragsieve.tools.index.retriever`). Metadata filters (`Where`) are evaluated by
Milvus as boolean expressions.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from ragsieve.tools.index import npy

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.milvus_client import Reloading, release_client, thread_round_trips
from ragsieve.tools.index.milvus_publish import analysed, client_for, read_pointer, resolve_uri
from ragsieve.tools.index.milvus_rows import pointer_filter
from ragsieve.tools.types import Chunk

_FIELDS = ["row", "doc_id", "chunk_index", "text", "source", "title", "kind", "line_start", "line_end", "symbol",
           "text_hash", "doc_hash"]
PAGE = 16000  # rows per query page (Milvus caps a query's limit at 16,384)


def _quote(value: str) -> str:
    import json

    return json.dumps(value)  # a Milvus filter string literal: double quotes, backslash escapes


def _in(rows: Sequence[int]) -> str:
    return f"row in [{', '.join(str(int(r)) for r in rows)}]"


def _and(expr: str | None, visible: str | None) -> str:
    """`expr` restricted to the published generation (`milvus_rows.pointer_filter`); "" means everything."""
    parts = [p for p in (expr, visible) if p]
    return " and ".join(f"({p})" for p in parts) if len(parts) > 1 else (parts[0] if parts else "")


class MilvusStore:
    def __init__(self, client, collection: str, count: int, visible: str | None = None):
        self.client, self.collection, self._count, self.visible = client, collection, count, visible

    def _query(self, expr: str, limit: int | None = None, fields: list[str] = _FIELDS) -> list[dict]:
        kwargs = {"limit": limit} if limit else {}
        return self.client.query(self.collection, filter=_and(expr, self.visible), output_fields=fields, **kwargs)

    @staticmethod
    def _chunk(r: dict) -> Chunk:
        return Chunk(doc_id=r["doc_id"], chunk_index=r["chunk_index"], text=r["text"], source=r["source"],
                     title=r["title"], kind=r["kind"], symbol=r["symbol"],
                     line_start=None if r["line_start"] < 0 else r["line_start"],
                     line_end=None if r["line_end"] < 0 else r["line_end"])

    def count(self) -> int:
        return self._count

    def get(self, row: int) -> Chunk:
        return self.get_many([row])[0]

    def get_many(self, rows: Sequence[int]) -> list[Chunk]:
        wanted = [int(r) for r in rows]
        found: dict[int, Chunk] = {}
        unique = sorted(set(wanted))
        for start in range(0, len(unique), 1000):
            for r in self._query(_in(unique[start:start + 1000]), limit=1000):
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
        near = self._query(f"doc_id == {_quote(doc[0]['doc_id'])} and chunk_index >= {at - radius} "
                           f"and chunk_index <= {at + radius} and row != {int(row)}", 2 * radius + 1,
                           ["row", "chunk_index"])
        return [r["row"] for r in sorted(near, key=lambda r: r["chunk_index"])]

    def row_of_text(self, text: str) -> int | None:
        from ragsieve.tools.index.store import text_hash

        found = self._query(f"text_hash == {_quote(text_hash(text))}", 16, ["row", "text"])
        rows = [r["row"] for r in found if r["text"] == text]
        return min(rows) if rows else None

    def documents(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for start in range(0, self._count, 16000):
            for r in sorted(self._query(f"row >= {start} and row < {start + 16000}", 16000,
                                        ["row", "doc_id", "doc_hash"]), key=lambda r: r["row"]):
                out.setdefault(r["doc_id"], r["doc_hash"])
        return out


class MilvusVectors:
    """`vectors[row]`, `vectors[[rows]]`, `vectors[a:b]`, `len(vectors)`, `np.asarray(vectors)` (all: calibration
    and the conformal step's whole-corpus view)."""

    def __init__(self, client, collection: str, count: int, dimension: int, visible: str | None = None):
        self.client, self.collection, self._count, self.visible = client, collection, count, visible
        self.shape = (count, dimension)
        self.ndim = 2

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self._fetch([int(key)])[0]
        if isinstance(key, slice):
            key = range(*key.indices(self._count))
        return self._fetch([int(r) for r in key])

    def __array__(self, dtype=None, copy=None):
        out = self._fetch(list(range(self._count)))
        return out.astype(dtype) if dtype is not None else out

    def _fetch(self, rows: list[int]) -> np.ndarray:
        found: dict[int, list[float]] = {}
        unique = sorted(set(rows))
        for start in range(0, len(unique), 1000):
            for r in self.client.query(self.collection, filter=_and(_in(unique[start:start + 1000]), self.visible),
                                       output_fields=["row", "dense"], limit=1000):
                found[r["row"]] = r["dense"]
        return np.asarray([found[r] for r in rows], dtype=np.float32).reshape(len(rows), self.shape[1])


class MilvusBM25:
    """Server-side BM25 (Milvus full-text search)."""

    def __init__(self, client, collection: str, stem: bool | None = True, visible: str | None = None,
                 identifiers: bool = False):
        self.client, self.collection, self.visible = client, collection, visible
        self.stem = stem  # None: a collection of raw text analysed by Milvus (published before 0.x)
        self.identifiers = identifiers  # the collection holds identifier terms (milvus_publish.analysed)
        self._last: tuple[str, list] | None = None  # the last unfiltered ranking (score_rows reads it)

    def query_text(self, query: str) -> str:
        """The query as the collection's BM25 input expects it (analysed like the indexed text)."""
        return query if self.stem is None else analysed(query, self.stem, self.identifiers)

    def search(self, query: str, k: int = 10, rows: list[int] | None = None) -> list[tuple[int, float]]:
        """Top `k` (row, BM25 score). Restricted to `rows`, the scores stay those of the whole collection:
        milvus-lite scores a filtered search with the filtered subset's statistics, so the unfiltered ranking
        is read deep and intersected; rows it does not reach follow in the filtered order, scored below."""
        if (rows is not None and not rows) or not query.strip():
            return []
        if rows is None:
            return self._search(query, k, None)
        wanted = set(int(r) for r in rows)
        deep = [p for p in self._search(query, min(16384, max(20 * k, 1000)), None) if p[0] in wanted][:k]
        if len(deep) >= min(k, len(wanted)):
            return deep
        floor = min((s for _, s in deep), default=1.0)
        rest = [p for p in self._search(query, k, sorted(wanted)) if p[0] not in {r for r, _ in deep}]
        top = max((s for _, s in rest), default=1.0)
        return deep + [(r, 0.5 * floor * s / top) for r, s in rest][:k - len(deep)]

    def _search(self, query: str, k: int, rows: list[int] | None) -> list[tuple[int, float]]:
        expr = _and(_in(rows) if rows is not None else None, self.visible)
        kwargs = {"filter": expr} if expr else {}
        text = self.query_text(query)
        if not text.strip():  # only stopwords: no BM25 match anywhere (as locally)
            return []
        found = self.client.search(self.collection, data=[text], anns_field="bm25", limit=min(k, 16384),
                                   output_fields=["row"], search_params={"metric_type": "BM25"}, **kwargs)
        # milvus-lite reports the BM25 score negated; the order is best first either way
        pairs = [(int(h["entity"]["row"]), abs(float(h["distance"]))) for h in (found[0] if found else [])]
        ranked = sorted((p for p in pairs if p[1] > 0), key=lambda p: (-p[1], p[0]))
        if rows is None:
            self._last = (query, ranked)
        return ranked

    def score_rows(self, query: str, rows) -> np.ndarray:
        """BM25 scores of `rows` as in an unfiltered search (0 for rows outside its top 16,384)."""
        rows = [int(r) for r in rows]
        if not rows or not query.strip():
            return np.zeros(len(rows), dtype=np.float64)
        last = self._last
        if last is not None and last[0] == query:  # the ranking the retriever just read: no second round trip
            scores = dict(last[1])
        else:
            scores = dict(self._search(query, 1000, None))
        return np.asarray([scores.get(r, 0.0) for r in rows], dtype=np.float64)


class MilvusDense:
    def __init__(self, client, collection: str, visible: str | None = None):
        self.client, self.collection, self.visible = client, collection, visible

    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        return self._search(vector, k, None)

    def search_rows(self, vector: np.ndarray, rows: list[int], k: int = 10) -> list[tuple[int, float]]:
        return self._search(vector, k, rows) if rows else []

    def _search(self, vector, k, rows):
        expr = _and(_in(rows) if rows is not None else None, self.visible)
        kwargs = {"filter": expr} if expr else {}
        found = self.client.search(self.collection, data=[np.asarray(vector, dtype=np.float32).reshape(-1).tolist()],
                                   anns_field="dense", limit=min(k, 16384), output_fields=["row"],
                                   search_params={"metric_type": "IP"}, **kwargs)
        pairs = [(int(h["entity"]["row"]), float(h["distance"])) for h in (found[0] if found else [])]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))


class MilvusIndex:
    """An index folder whose live generation is served by Milvus (see the module doc)."""

    def __init__(self, root: Path, pointer: dict, manifest: dict, client, embedder=None):
        from ragsieve.tools.index.backend import Backend

        self.backend = Backend.MILVUS
        self.root, self.path, self.manifest, self.pointer = root, root, manifest, pointer
        self.client = client
        collection, n = pointer["collection"], int(pointer["rows"])
        self.visible = visible = pointer_filter(pointer)
        self.store = MilvusStore(client, collection, n, visible)
        stem = pointer.get("bm25", {}).get("stem", True) if pointer.get("bm25_input") == "pretokenized" else None
        self.bm25 = MilvusBM25(client, collection, stem, visible,
                               identifiers=bool(pointer.get("bm25", {}).get("identifiers", False)))
        self.dense = MilvusDense(client, collection, visible)
        self.vectors = MilvusVectors(client, collection, n, int(pointer["dimension"]), visible)
        if pointer.get("sparse_file"):  # stable-rows collections: the generation's subset beside the pointer
            self.sparse_rows = npy.load(root / pointer["sparse_file"]).astype(int).tolist()
        else:  # collections published before: a flag per entity
            self.sparse_rows = sorted(r["row"] for r in client.query(collection, filter="sparse_flag == true",
                                                                       output_fields=["row"], limit=16384))
        self.model_name = manifest["embedding"]["model"]
        self._embedder = embedder
        self._lock = threading.Lock()

    @classmethod
    def open(cls, index_dir: str | Path, embedder=None, token: str | None = None) -> "MilvusIndex":
        from ragsieve.tools.index.hybrid import current_generation, read_manifest

        from ragsieve.tools.index.milvus_leases import hold

        root = Path(index_dir)
        pointer, lease = hold(root, lambda: read_pointer(root))  # its generation is kept until close()
        gen = current_generation(root)
        manifest = read_manifest(gen) if gen is not None else {"embedding": {"model": ""}}
        try:
            client = client_for(resolve_uri(root, pointer["uri"]), token or os.environ.get("RAGSIEVE_MILVUS_TOKEN"),
                                wait_s=10.0)
            if not client.has_collection(pointer["collection"]):
                raise IndexMissingError(f"index {root}: Milvus collection {pointer['collection']} not found at "
                                        f"{pointer['uri']}; publish again with `ragsieve migrate`")
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

    def _model(self):
        with self._lock:
            if self._embedder is None:
                from ragsieve.tools.index.embedders import open_embedder

                self._embedder = open_embedder(self.manifest["embedding"])  # the provider that built the index
            return self._embedder

    def embed_query(self, text: str) -> np.ndarray:
        return self._model().embed([text])[0]

    def filter_rows(self, where) -> list[int]:
        """The rows a metadata filter admits, evaluated by Milvus (`Where.milvus_expr`), page by page."""
        expr = where.milvus_expr()
        if not expr:
            return list(range(len(self)))
        rows: list[int] = []
        for start in range(0, len(self), PAGE):
            found = self.client.query(self.pointer["collection"], output_fields=["row"], limit=PAGE,
                                      filter=_and(f"row >= {start} and row < {start + PAGE} and ({expr})",
                                                  self.visible))
            rows.extend(int(r["row"]) for r in found)
        return sorted(rows)

    def hybrid_search(self, bm25_query: str, vector: np.ndarray, k: int, fusion: str, rrf_k: int = 60,
                      weights: tuple[float, float] = (1.0, 1.0), candidate_k: int = 100,
                      payload: bool = False) -> list[tuple]:
        """BM25 top `candidate_k` and dense top `candidate_k` fused by Milvus (one `hybrid_search` call):
        (row, score) pairs, or with `payload` (row, score, chunk, vector), all from that one request.

        fusion "rrf": `RRFRanker(rrf_k)`, sum of 1 / (rrf_k + rank) as the local RRF; Milvus has no per-list
        weights for it, so unequal weights are refused. fusion "weighted": `WeightedRanker(w_bm25, w_dense)`
        with Milvus' score normalisation (arctan), not the local min-max one: rankings can differ."""
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        w_bm25, w_dense = weights
        if fusion == "rrf" and w_bm25 != w_dense:
            raise UsageError("Milvus' RRF ranker has no per-list weights: use equal bm25/dense weights, "
                             "weighted fusion, or retrieval.fusion_site = \"client\"")
        text = self.bm25.query_text(bm25_query)
        vec = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        limit = min(candidate_k, 16384)
        vis = {"expr": self.visible} if self.visible else {}
        reqs = [AnnSearchRequest(data=[vec], anns_field="dense", param={"metric_type": "IP"}, limit=limit, **vis)]
        if text.strip():
            reqs.insert(0, AnnSearchRequest(data=[text], anns_field="bm25", param={"metric_type": "BM25"},
                                            limit=limit, **vis))
        if fusion == "rrf":
            ranker = RRFRanker(rrf_k)
        elif len(reqs) == 2:
            ranker = WeightedRanker(w_bm25, w_dense)
        else:
            ranker = WeightedRanker(w_dense)
        found = self.client.hybrid_search(self.pointer["collection"], reqs, ranker, limit=min(k, 16384),
                                          output_fields=_FIELDS + ["dense"] if payload else ["row"])
        hits = found[0] if found else []
        if payload:
            out = [(int(h["entity"]["row"]), float(h["distance"]), MilvusStore._chunk(h["entity"]),
                    np.asarray(h["entity"]["dense"], dtype=np.float32)) for h in hits]
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
        lease = getattr(self, "_lease", None)
        if lease is not None:  # publishes may now expire what this generation showed (`milvus_leases`)
            self._lease = None
            lease.release()
        try:
            release_client(getattr(self.client, "_client", self.client), resolve_uri(self.root, self.pointer["uri"]))
        except Exception:  # pragma: no cover - closing is best effort
            pass

    def __enter__(self) -> "MilvusIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
