"""Writing the `milvus` backend: a local generation copied into a Milvus collection, switched atomically.

One collection per published generation holds every chunk: its text, metadata
(`doc_id`, `source`, `kind`, lines, `symbol`, `tenant`), the dense vector (FLAT or
HNSW, inner product) and a BM25 sparse vector computed by Milvus' own BM25
function, so BM25, dense and hybrid search run server-side. `tenant` is the
partition key. Rows keep the local numbering (a document's chunks are
consecutive), so the pipeline is unchanged.

BM25 input: Milvus analyses `search_text`, which holds the chunk's indexed text
already analysed by the local BM25 tokenizer (lowercase `\\w+`, bm25s English
stopwords removed, Snowball stems), one token per word; the analyzer is Milvus'
`standard` tokenizer, which keeps each such token whole. Queries are analysed
the same way before they are sent. Both backends therefore score the same
tokens with Lucene BM25 and k1, b from the index manifest (Milvus' own stemmer
and tokenizer split words differently: SciFact BM25 nDCG@10 0.7035 vs 0.7355
locally in an earlier run). milvus-lite ignores k1 and b and uses 1.5 / 0.75
(`bm25_params_applied`), so on it the BM25 rankings still differ slightly unless
the local index is built with those values. A client querying the collection
directly must analyse its query the same way (`ragsieve.tools.index.bm25.tokenize`).

Atomic switch: a build writes the local generation first (embeddings reused as
usual), then `publish` inserts it into a new collection `<name>_g<N>`, loads
it, and only then rewrites `<index>/milvus.json` (atomically) to point at it;
readers open the collection that file names, so they see the old generation
or the new one, never half of one. The Milvus alias `<name>` is moved to the new
collection at the same moment, for clients that query Milvus directly. The previous collection is dropped after
the switch (readers still on it fail and reopen). `migrate` is `publish` of an
existing local index: nothing is embedded again.
"""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import IndexMissingError, ModelUnavailableError, UsageError

log = logging.getLogger(__name__)

POINTER = "milvus.json"
BATCH = 2000
ANALYZER = {"tokenizer": "standard"}  # the text arrives analysed (see the module doc)
MILVUS_LITE_BM25 = (1.5, 0.75)  # what milvus-lite scores with whatever it is given
BM25_INPUT = "pretokenized"  # recorded in the pointer; older collections ("raw") analysed with Milvus' stemmer


def client_for(uri: str, token: str | None = None):
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise ModelUnavailableError("the milvus backend needs pymilvus (and milvus-lite for a local file): "
                                    "pip install 'ragsieve[milvus]'") from exc
    try:
        return MilvusClient(uri=uri, token=token or "")
    except Exception as exc:  # pymilvus raises MilvusException / ConnectionError variants
        raise IndexMissingError(f"cannot reach Milvus at {uri}: {type(exc).__name__}: {str(exc)[:200]}") from None


def read_pointer(root: Path) -> dict:
    try:
        return json.loads((Path(root) / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexMissingError(f"index {root}: {POINTER} is missing or damaged ({exc})") from None


def bm25_settings(manifest: dict) -> dict:
    """k1, b and stemming of the local BM25 index, which Milvus must reproduce."""
    bm = manifest.get("bm25") or {}
    return {"k1": float(bm.get("k1", 0.9)), "b": float(bm.get("b", 0.4)), "stem": bool(bm.get("stem", True))}


def analysed(text: str, stem: bool) -> str:
    from ragsieve.tools.index.bm25 import tokenize

    return " ".join(tokenize(text, stem))


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
        bm25 = bm25_settings(local.manifest)
        client = client_for(uri, token)
        try:
            if client.has_collection(collection):
                client.drop_collection(collection)
            dim = int(local.vectors.shape[1])
            create_collection(client, collection, dim, index_type, k1=bm25["k1"], b=bm25["b"])
            bm25["applied"] = bm25_params_applied(client, collection, bm25)
            _copy(client, collection, local, tenant, bm25["stem"])
            client.flush(collection)  # seal the segments: indexes are built now, not searched brute force
            client.load_collection(collection)
            _point_alias(client, name, collection)
        except Exception as exc:
            if isinstance(exc, (UsageError, IndexMissingError)):
                raise
            raise IndexMissingError(f"publishing to Milvus at {uri} failed: {type(exc).__name__}: "
                                    f"{str(exc)[:300]}") from None
        pointer = {"uri": uri, "name": name, "collection": collection, "generation": gen, "tenant": tenant,
                   "alias": name, "rows": len(local), "dimension": dim, "index_type": index_type,
                   "bm25_input": BM25_INPUT,
                   "bm25": bm25, "token_env": "RAGSIEVE_MILVUS_TOKEN" if token else None}
        tmp = root / f".{POINTER}.tmp"
        tmp.write_text(json.dumps(pointer, indent=2), encoding="utf-8")
        os.replace(tmp, root / POINTER)  # the switch: readers now open the new collection
        old = previous.get("collection")
        if old and old != collection and previous.get("uri") == uri and client.has_collection(old):
            client.drop_collection(old)
        client.close()
    return pointer


def _point_alias(client, alias: str, collection: str) -> None:
    """Milvus' own atomic switch: the alias `<name>` now names the new collection (for clients that query
    Milvus directly; ragsieve's readers open the concrete collection named in the pointer file, so a reader
    keeps one consistent generation until it reopens)."""
    try:
        if alias not in (client.list_aliases().get("aliases") or []):  # (describe_alias logs an error when absent)
            client.create_alias(collection, alias)
        elif alias not in (client.list_aliases(collection).get("aliases") or []):
            client.alter_alias(collection, alias)
    except Exception as exc:  # an engine without aliases: the pointer file alone switches
        log.warning("Milvus alias %s not set (%s: %s); readers still switch by %s", alias, type(exc).__name__,
                    str(exc)[:120], POINTER)


def bm25_params_applied(client, collection: str, bm25: dict) -> bool:
    """Whether the engine kept the BM25 k1 and b it was given. milvus-lite 3.2.2 drops them and scores with
    k1 = 1.5, b = 0.75 (measured: its scores fit Lucene BM25 with those values exactly), so BM25 rankings
    then differ a little from the local index's; a warning says so and the pointer records it."""
    try:
        described = client.describe_index(collection, "bm25") or {}
    except Exception:  # an engine that cannot describe: assume it applied what it accepted
        return True
    kept = str(described.get("bm25_k1", "")) and str(described.get("bm25_b", ""))
    if not kept and (bm25["k1"], bm25["b"]) != MILVUS_LITE_BM25:
        log.warning("Milvus at this URI ignored bm25_k1=%s bm25_b=%s and scores BM25 with its defaults "
                    "(milvus-lite: k1=1.5, b=0.75); build the local index with those values for identical "
                    "BM25 rankings, or use a Milvus server", bm25["k1"], bm25["b"])
    return bool(kept)


def create_collection(client, collection: str, dim: int, index_type: str = "FLAT", *, k1: float = 0.9,
                      b: float = 0.4) -> None:
    """The chunk collection: metadata, text, a dense vector and Milvus' BM25 function over `search_text`."""
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
                     params={"bm25_k1": k1, "bm25_b": b})
    client.create_collection(collection, schema=schema, index_params=params)


def _copy(client, collection: str, local, tenant: str, stem: bool) -> None:
    from ragsieve.tools.index.builder import indexed_text
    from ragsieve.tools.index.store import text_hash

    n = len(local)
    hashes = local.store.documents()
    sparse = set(local.sparse_rows)
    headers = local.manifest.get("settings", {}).get("chunking", {}).get("symbol_headers", True)
    titles = local.manifest.get("index_titles", True)  # the local BM25 indexed exactly this text
    for start in range(0, n, BATCH):
        rows = list(range(start, min(n, start + BATCH)))
        chunks = local.store.get_many(rows)
        vectors = np.asarray(local.vectors[rows], dtype=np.float32)
        client.insert(collection, [{
            "row": r, "doc_id": c.doc_id, "chunk_index": c.chunk_index, "text": c.text[:65000],
            "search_text": analysed(indexed_text(c, headers) if titles else c.text, stem)[:65000],
            "source": c.source[:4000], "title": c.title[:1000],
            "kind": c.kind, "symbol": c.symbol[:1000], "line_start": -1 if c.line_start is None else c.line_start,
            "line_end": -1 if c.line_end is None else c.line_end, "text_hash": text_hash(c.text),
            "doc_hash": hashes.get(c.doc_id, ""), "sparse_flag": r in sparse, "tenant": tenant,
            "dense": v.tolist()} for r, c, v in zip(rows, chunks, vectors)])
