"""The `milvus` backend: an index served by Milvus (milvus-lite file, standalone, cluster or Zilliz).

One collection per published generation holds every chunk: its text, metadata
(`doc_id`, `source`, `kind`, lines, `symbol`, `tenant`), the dense vector (FLAT or
HNSW, inner product) and a BM25 sparse vector computed by Milvus' own BM25
function from the indexed text, so BM25, dense and hybrid search run
server-side. `tenant` is the partition key. Rows keep the local numbering
(a document's chunks are consecutive), so the pipeline is unchanged.

Atomic switch: a build writes the local generation first (embeddings reused as
usual), then `publish` inserts it into a new collection `<name>_g<N>`, loads
it, and only then rewrites `<index>/milvus.json` (atomically) to point at it;
readers open the collection that file names, so they see the old generation
or the new one, never half of one. The previous collection is dropped after
the switch (readers still on it fail and reopen). `migrate` is `publish` of an
existing local index: nothing is embedded again.
"""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from ragsieve.tools.errors import IndexMissingError, ModelUnavailableError, UsageError
from ragsieve.tools.types import Chunk

POINTER = "milvus.json"
BATCH = 2000
_FIELDS = ["row", "doc_id", "chunk_index", "text", "source", "title", "kind", "line_start", "line_end", "symbol",
           "text_hash", "doc_hash", "sparse_flag"]
ANALYZER = {"tokenizer": "standard", "filter": ["lowercase", {"type": "stemmer", "language": "english"}]}


def _client(uri: str, token: str | None = None):
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise ModelUnavailableError("the milvus backend needs pymilvus (and milvus-lite for a local file): "
                                    "pip install 'ragsieve[milvus]'") from exc
    try:
        return MilvusClient(uri=uri, token=token or "")
    except Exception as exc:  # pymilvus raises MilvusException / ConnectionError variants
        raise IndexMissingError(f"cannot reach Milvus at {uri}: {type(exc).__name__}: {str(exc)[:200]}") from None


def _quote(value: str) -> str:
    return json.dumps(value)  # a Milvus filter string literal: double quotes, backslash escapes


def _in(rows: Sequence[int]) -> str:
    return f"row in [{', '.join(str(int(r)) for r in rows)}]"


def read_pointer(root: Path) -> dict:
    try:
        return json.loads((root / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexMissingError(f"index {root}: {POINTER} is missing or damaged ({exc})") from None


def publish(root: str | Path, *, uri: str | None = None, token: str | None = None, name: str | None = None,
            tenant: str = "default", index_type: str = "FLAT") -> dict:
    """Copy the live local generation of `root` into a new Milvus collection and switch to it atomically."""
    from ragsieve.tools.index.hybrid import HybridIndex

    root = Path(root)
    previous = read_pointer(root) if (root / POINTER).is_file() else {}
    uri = uri or previous.get("uri") or str(root / "milvus.db")
    name = name or previous.get("name") or re.sub(r"\W", "_", root.resolve().name).strip("_") or "ragsieve"
    with HybridIndex.open(root) as local:
        gen = local.path.name
        collection = f"{name}_{re.sub(r'[^0-9A-Za-z_]', '_', gen)}"
        client = _client(uri, token)
        try:
            if client.has_collection(collection):
                client.drop_collection(collection)
            dim = int(local.vectors.shape[1])
            create_collection(client, collection, dim, index_type)
            _copy(client, collection, local, tenant)
            client.load_collection(collection)
        except Exception as exc:
            if isinstance(exc, (UsageError, IndexMissingError)):
                raise
            raise IndexMissingError(f"publishing to Milvus at {uri} failed: {type(exc).__name__}: "
                                    f"{str(exc)[:300]}") from None
        pointer = {"uri": uri, "name": name, "collection": collection, "generation": gen, "tenant": tenant,
                   "rows": len(local), "dimension": dim, "index_type": index_type,
                   "token_env": "RAGSIEVE_MILVUS_TOKEN" if token else None}
        tmp = root / f".{POINTER}.tmp"
        tmp.write_text(json.dumps(pointer, indent=2), encoding="utf-8")
        os.replace(tmp, root / POINTER)  # the switch: readers now open the new collection
        old = previous.get("collection")
        if old and old != collection and previous.get("uri") == uri and client.has_collection(old):
            client.drop_collection(old)
        client.close()
    return pointer


def create_collection(client, collection: str, dim: int, index_type: str = "FLAT") -> None:
    """The chunk collection: metadata, text, a dense vector and Milvus' BM25 function over the indexed text."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("row", DataType.INT64, is_primary=True)
    for field, length in (("doc_id", 2048), ("source", 4096), ("title", 1024), ("kind", 32),
                          ("symbol", 1024), ("text_hash", 64), ("doc_hash", 128)):
        schema.add_field(field, DataType.VARCHAR, max_length=length)
    schema.add_field("tenant", DataType.VARCHAR, max_length=128, is_partition_key=True)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("line_start", DataType.INT64)
    schema.add_field("line_end", DataType.INT64)
    schema.add_field("sparse_flag", DataType.BOOL)
    schema.add_field("text", DataType.VARCHAR, max_length=65535)
    schema.add_field("search_text", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                     analyzer_params=ANALYZER)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                 input_field_names=["search_text"], output_field_names=["bm25"]))
    params = client.prepare_index_params()
    dense_params = {"M": 32, "efConstruction": 200} if index_type == "HNSW" else {}
    params.add_index("dense", index_type=index_type, metric_type="IP", params=dense_params)
    params.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"bm25_k1": 0.9, "bm25_b": 0.4})
    client.create_collection(collection, schema=schema, index_params=params)


def _copy(client, collection: str, local, tenant: str) -> None:
    from ragsieve.tools.index.builder import indexed_text
    from ragsieve.tools.index.store import text_hash

    n = len(local)
    hashes = local.store.documents()
    sparse = set(local.sparse_rows)
    headers = local.manifest.get("settings", {}).get("chunking", {}).get("symbol_headers", True)
    for start in range(0, n, BATCH):
        rows = list(range(start, min(n, start + BATCH)))
        chunks = local.store.get_many(rows)
        vectors = np.asarray(local.vectors[rows], dtype=np.float32)
        client.insert(collection, [{
            "row": r, "doc_id": c.doc_id, "chunk_index": c.chunk_index, "text": c.text[:65000],
            "search_text": indexed_text(c, headers)[:65000], "source": c.source[:4000], "title": c.title[:1000],
            "kind": c.kind, "symbol": c.symbol[:1000], "line_start": -1 if c.line_start is None else c.line_start,
            "line_end": -1 if c.line_end is None else c.line_end, "text_hash": text_hash(c.text),
            "doc_hash": hashes.get(c.doc_id, ""), "sparse_flag": r in sparse, "tenant": tenant,
            "dense": v.tolist()} for r, c, v in zip(rows, chunks, vectors)])


class MilvusStore:
    def __init__(self, client, collection: str, count: int):
        self.client, self.collection, self._count = client, collection, count

    def _query(self, expr: str, limit: int | None = None) -> list[dict]:
        kwargs = {"limit": limit} if limit else {}
        return self.client.query(self.collection, filter=expr, output_fields=_FIELDS, **kwargs)

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
        found = self.client.query(self.collection, filter=f"doc_id == {_quote(doc_id)}",
                                  output_fields=["row", "chunk_index"], limit=16384)
        return [r["row"] for r in sorted(found, key=lambda r: r["chunk_index"])]

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        return self.get_many(self.doc_rows(doc_id))

    def neighbours(self, row: int, radius: int = 1) -> list[int]:
        doc = self.client.query(self.collection, filter=f"row == {int(row)}", output_fields=["doc_id"], limit=1)
        if not doc:
            return []
        near = self.client.query(self.collection, output_fields=["row"], limit=2 * radius + 1,
                                 filter=f"doc_id == {_quote(doc[0]['doc_id'])} and row >= {row - radius} "
                                        f"and row <= {row + radius} and row != {int(row)}")
        return sorted(r["row"] for r in near)

    def row_of_text(self, text: str) -> int | None:
        from ragsieve.tools.index.store import text_hash

        found = self.client.query(self.collection, filter=f"text_hash == {_quote(text_hash(text))}",
                                  output_fields=["row", "text"], limit=16)
        rows = [r["row"] for r in found if r["text"] == text]
        return min(rows) if rows else None

    def documents(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for start in range(0, self._count, 16000):
            for r in self.client.query(self.collection, filter=f"row >= {start} and row < {start + 16000}",
                                       output_fields=["doc_id", "doc_hash"], limit=16000):
                out.setdefault(r["doc_id"], r["doc_hash"])
        return out


class MilvusVectors:
    """`vectors[row]`, `vectors[[rows]]`, `len(vectors)`, `np.asarray(vectors)` (all: calibration only)."""

    def __init__(self, client, collection: str, count: int, dimension: int):
        self.client, self.collection, self._count = client, collection, count
        self.shape = (count, dimension)
        self.ndim = 2

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self._fetch([int(key)])[0]
        return self._fetch([int(r) for r in key])

    def __array__(self, dtype=None, copy=None):
        out = self._fetch(list(range(self._count)))
        return out.astype(dtype) if dtype is not None else out

    def _fetch(self, rows: list[int]) -> np.ndarray:
        found: dict[int, list[float]] = {}
        unique = sorted(set(rows))
        for start in range(0, len(unique), 1000):
            for r in self.client.query(self.collection, filter=_in(unique[start:start + 1000]),
                                       output_fields=["row", "dense"], limit=1000):
                found[r["row"]] = r["dense"]
        return np.asarray([found[r] for r in rows], dtype=np.float32).reshape(len(rows), self.shape[1])


class MilvusBM25:
    """Server-side BM25 (Milvus full-text search)."""

    def __init__(self, client, collection: str):
        self.client, self.collection = client, collection
        self._last: tuple[str, list] | None = None  # the last unfiltered ranking (score_rows reads it)

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
        kwargs = {"filter": _in(rows)} if rows is not None else {}
        found = self.client.search(self.collection, data=[query], anns_field="bm25", limit=min(k, 16384),
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
    def __init__(self, client, collection: str):
        self.client, self.collection = client, collection

    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        return self._search(vector, k, None)

    def search_rows(self, vector: np.ndarray, rows: list[int], k: int = 10) -> list[tuple[int, float]]:
        return self._search(vector, k, rows) if rows else []

    def _search(self, vector, k, rows):
        kwargs = {"filter": _in(rows)} if rows is not None else {}
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
        self.store = MilvusStore(client, collection, n)
        self.bm25 = MilvusBM25(client, collection)
        self.dense = MilvusDense(client, collection)
        self.vectors = MilvusVectors(client, collection, n, int(pointer["dimension"]))
        self.sparse_rows = sorted(r["row"] for r in client.query(collection, filter="sparse_flag == true",
                                                                   output_fields=["row"], limit=16384))
        self.model_name = manifest["embedding"]["model"]
        self._embedder = embedder
        self._lock = threading.Lock()

    @classmethod
    def open(cls, index_dir: str | Path, embedder=None, token: str | None = None) -> "MilvusIndex":
        from ragsieve.tools.index.hybrid import current_generation, read_manifest

        root = Path(index_dir)
        pointer = read_pointer(root)
        gen = current_generation(root)
        manifest = read_manifest(gen) if gen is not None else {"embedding": {"model": ""}}
        client = _client(pointer["uri"], token or os.environ.get("RAGSIEVE_MILVUS_TOKEN"))
        if not client.has_collection(pointer["collection"]):
            raise IndexMissingError(f"index {root}: Milvus collection {pointer['collection']} not found at "
                                    f"{pointer['uri']}; publish again with `ragsieve migrate`")
        client.load_collection(pointer["collection"])
        return cls(root, pointer, manifest, client, embedder)

    def __len__(self) -> int:
        return self.store.count()

    def _model(self):
        with self._lock:
            if self._embedder is None:
                from ragsieve.tools.index.dense import Embedder

                self._embedder = Embedder(self.model_name, encoder=self.manifest["embedding"].get("encoder", "torch"))
            return self._embedder

    def embed_query(self, text: str) -> np.ndarray:
        return self._model().embed([text])[0]

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._model().embed(texts)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # pragma: no cover - closing is best effort
            pass

    def __enter__(self) -> "MilvusIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
