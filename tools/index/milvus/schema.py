"""The Milvus chunk collection's schema and its BM25 input (see `ragsieve.tools.index.milvus.publish`).

`search_text` holds the chunk's indexed text already analysed by the local BM25 tokenizer, one token per
word, and Milvus' `standard` tokenizer keeps each such token whole, so both backends score the same tokens.
"""

from __future__ import annotations

import logging

from ragsieve.tools.index.milvus.client import Client
from ragsieve.tools.index.search.bm25 import tokenize

log = logging.getLogger(__name__)

ANALYZER = {"tokenizer": "standard"}  # the text arrives analysed (see the module doc)
MILVUS_LITE_BM25 = (1.5, 0.75)  # what milvus-lite scores with whatever it is given
BM25_INPUT = "pretokenized"  # recorded in the pointer; older collections ("raw") analysed with Milvus' stemmer


def bm25_settings(manifest: dict) -> dict:
    """k1, b, stemming and identifier terms of the local BM25 index, which Milvus must reproduce."""
    bm = manifest.get("bm25") or {}
    return {
        "k1": float(bm.get("k1", 0.9)),
        "b": float(bm.get("b", 0.4)),
        "stem": bool(bm.get("stem", True)),
        "identifiers": bool(bm.get("identifiers", False)),
        "compounds": bool(bm.get("compounds", False)),
    }


DOT = "_d0t_"  # `re.search` -> `re_d0t_search`: the `standard` tokenizer splits at "." but keeps `_` runs whole


def analysed(text: str, stem: bool, identifiers: bool = False, compounds: bool = False) -> str:
    """The local BM25 tokens as one Milvus input string. With `identifiers`, a whole dotted identifier
    (`re.search`) is written with DOT for its dots, so Milvus' `standard` tokenizer (milvus-lite offers no
    `whitespace` one) keeps it one token, as the local index does; `token_urlsafe` stays whole as it is."""
    tokens = tokenize(text, stem, identifiers, compounds)  # `compounds`: a document's text, never a query
    return " ".join(t.replace(".", DOT) for t in tokens) if identifiers else " ".join(tokens)


def bm25_params_applied(client: Client, collection: str, bm25: dict) -> bool:
    """Whether the engine kept the BM25 k1 and b it was given. milvus-lite 3.2.2 drops them and scores with
    k1 = 1.5, b = 0.75 (measured: its scores fit Lucene BM25 with those values exactly), so BM25 rankings
    then differ a little from the local index's; a warning says so and the pointer records it."""
    try:
        described = client.describe_index(collection, "bm25") or {}
    except Exception:  # an engine that cannot describe: assume it applied what it accepted
        return True
    kept = str(described.get("bm25_k1", "")) and str(described.get("bm25_b", ""))
    if not kept and (bm25["k1"], bm25["b"]) != MILVUS_LITE_BM25:
        log.warning(
            "Milvus at this URI ignored bm25_k1=%s bm25_b=%s and scores BM25 with its defaults "
            "(milvus-lite: k1=1.5, b=0.75); build the local index with those values for identical "
            "BM25 rankings, or use a Milvus server",
            bm25["k1"],
            bm25["b"],
        )
    return bool(kept)


def create_collection(
    client: Client, collection: str, dim: int, index_type: str = "FLAT", *, k1: float = 0.9, b: float = 0.4
) -> None:
    """The chunk collection: metadata, text, a dense vector and Milvus' BM25 function over `search_text`."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)  # generation << 36 | row (`milvus.rows`)
    schema.add_field("row", DataType.INT64)
    schema.add_field("born", DataType.INT64)
    schema.add_field("died", DataType.INT64)
    for field, length in (
        ("doc_id", 2048),
        ("source", 4096),
        ("title", 1024),
        ("kind", 32),
        ("symbol", 1024),
        ("text_hash", 64),
        ("doc_hash", 128),
    ):
        schema.add_field(field, DataType.VARCHAR, max_length=length)
    schema.add_field("tenant", DataType.VARCHAR, max_length=128, is_partition_key=True)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("line_start", DataType.INT64)
    schema.add_field("line_end", DataType.INT64)
    schema.add_field("text", DataType.VARCHAR, max_length=65535)
    schema.add_field("search_text", DataType.VARCHAR, max_length=65535, enable_analyzer=True, analyzer_params=ANALYZER)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["search_text"], output_field_names=["bm25"])
    )
    params = client.prepare_index_params()
    dense_params = {"M": 32, "efConstruction": 200} if index_type == "HNSW" else {}
    params.add_index("dense", index_type=index_type, metric_type="IP", params=dense_params)
    params.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params={"bm25_k1": k1, "bm25_b": b})
    for field in ("row", "born", "died"):  # the visibility filter and row lookups run on every read
        params.add_index(field, index_type="INVERTED")
    client.create_collection(collection, schema=schema, index_params=params, consistency_level="Strong")
