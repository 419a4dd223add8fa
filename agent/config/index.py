"""The `[index]` and `[retrieval]` sections: how an index is built and served, and how it is searched."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ragsieve.agent.config.base import _mode, _Section
from ragsieve.tools.modes import Backend, BM25Engine, FaissKind, FusionMode, FusionSite, RankingMode, check_spec


class IndexConfig(_Section):
    chunk_tokens: int = Field(200, ge=16, le=8192)
    lock_wait_s: float | None = Field(300.0, ge=0)  # another build holds the index: wait this long (None: for ever)
    embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    faiss_index: str = "flat"  # flat | hnsw
    bm25_engine: str = "bm25s"  # bm25s | rank_bm25
    _faiss = _mode(FaissKind, "faiss_index")
    _bm25 = _mode(BM25Engine, "bm25_engine")
    embed_batch_size: int | None = Field(None, ge=1)  # None: 64 (an endpoint, the CPU), 512 on a GPU
    # where the local model embeds chunks and queries: auto (a GPU torch sees, else the CPU) | cpu | cuda[:N] |
    # mps (ragsieve.tools.index.embedders.device); on a GPU a new index gets the torch-fp16 encoder
    device: str = "auto"
    embed_concurrency: int = Field(1, ge=1, le=64)  # an embeddings endpoint: requests in flight at once
    # COS-Mix sparse subset: chunks whose nearest other chunk is less similar than this corpus percentile
    sparse_percentile: float = Field(10.0, gt=0.0, lt=100.0)
    # where the index is served from (ragsieve.tools.index.backend): local | milvus; for milvus, `uri` is a
    # milvus-lite file (default <index>/milvus.db), http://host:19530 or a Zilliz URI, the token from the
    # environment variable RAGSIEVE_MILVUS_TOKEN
    encoder: Literal["torch", "torch-fp16", "onnx", "onnx-int8"] | None = (
        None  # None: the index's recorded one, else torch-fp16 on a GPU, onnx-int8 on the CPU (torch without onnx) | torch | torch-fp16 (half precision on a GPU) | onnx (same vectors, ONNX Runtime) | onnx-int8 (int8 weights; re-embeds)
    )
    backend: str = "local"
    _backend = _mode(Backend, "backend")
    uri: str | None = None
    milvus_index: str = "FLAT"  # FLAT (exact) | HNSW | IVF_FLAT ... (Milvus index types)
    # embedding provider (ragsieve.tools.index.embedders); None: openai when embed_base_url is set, else
    # sentence-transformers (embedding_model: a hub name or a local folder; the packaged MiniLM offline).
    # openai: any OpenAI-compatible /v1/embeddings at embed_base_url, embedding_model the model's name there.
    embedding_provider: Literal["sentence-transformers", "openai"] | None = None
    embed_base_url: str | None = None
    embed_api_key_env: str = "RAGSIEVE_EMBED_API_KEY"  # the variable holding the endpoint's key (never the key)
    embed_dimensions: int | None = Field(None, ge=1)  # ask for this many dimensions (models that take `dimensions`)
    embed_max_input_tokens: int | None = Field(8191, ge=1)  # longer inputs are cut (estimated), and counted
    embed_timeout_s: float = Field(120.0, gt=0)  # the chat calls' rules: each attempt bounded in all ...
    embed_max_attempts: int = Field(5, ge=1, le=20)  # ... attempts on 429/5xx/timeouts ...
    embed_max_retry_s: float = Field(300.0, gt=0)  # ... and the total time spent retrying (room to retry a timeout)

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return check_spec(value)


class RetrievalConfig(_Section):
    fusion: str = "weighted"  # weighted (min-max, the weights below) | rrf; SciFact nDCG@10 of each: benchmarks/retrieval.py
    _fusion = _mode(FusionMode, "fusion")
    # who fuses: client | server (Milvus hybrid_search with its RRF / weighted rankers) | auto (server when
    # it is the same fusion: rrf with equal weights on milvus); server on a local index is refused
    fusion_site: str = "auto"
    _fusion_site = _mode(FusionSite, "fusion_site")
    rrf_k: int = Field(60, ge=1)
    # the share of each min-max normalised list in the fused score, chosen on SciFact's train claims (809 queries,
    # never the test ones): 0.6/0.4 scored nDCG@10 0.738 there against 0.734 for 50/50
    # (benchmarks/results/retrieval_methods.json, which also records the methods that did not earn a place)
    bm25_weight: float = Field(0.6, ge=0.0)
    dense_weight: float = Field(0.4, ge=0.0)
    top_k: int = Field(5, ge=1, le=1000)  # the `fast` plan's context
    candidate_k: int = Field(100, ge=1, le=100_000)  # first-stage depth (metrics, expansion)
    pool: int = Field(20, ge=1, le=1000)  # the candidate pool every stage works from (judge, conformal, GMM, RSE)
    exclude_sparse: bool = False  # COS-Mix: first stage over R (the non-sparse rest); the fallback searches S
    symbols: bool = True  # a query naming a function/class/API entry gets its definition first (symbol table)
    stitch: bool = True  # a piece of a split code definition reaches the answer as the whole definition
    # one hit per split code definition: its later pieces leave the ranked list, which is read further (code
    # benchmark R@5 0.698 -> 0.703, 5.0 instead of 4.53 passages in the stitched top 5: results/sources.json);
    # false: every piece keeps its own place
    collapse: bool = True
    # one hit per page section (the same URL#anchor): a section's later chunks leave the ranked list, which is
    # read further, so a top 3 is three sections; false: every chunk keeps its own place
    sections: bool = True
    # source-first: for "where is X implemented", definitions in source files before other code, tests and prose
    # (ragsieve.tools.index.query.source_first); hybrid: the fused order
    ranking: str = "hybrid"
    _ranking = _mode(RankingMode, "ranking")
