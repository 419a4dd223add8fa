"""Configuration: plain pydantic models passed explicitly (no global settings).

`Config.load(path)` reads a TOML file whose tables match the sections below;
`LLMConfig` also reads the usual environment variables (OPENAI_BASE_URL,
OPENAI_API_KEY, OPENAI_MODEL / RAGSIEVE_MODEL) when a field is not set.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragsieve.agent.errors import UsageError
from ragsieve.agent.judging.rule import ContextRule
from ragsieve.tools.filters.ordering import ContextOrder
from ragsieve.tools.index.backend import Backend
from ragsieve.tools.modes import BM25Engine, FaissKind, FusionMode, FusionSite, RankingMode, parse_enum
from ragsieve.tools.rerankers.flashrank_provider import FLASHRANK_MODELS

PROMPT_RESERVE = 1024  # tokens of the answer prompt besides the passages (template, question, instructions)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


def _mode(enum_cls, what: str):
    """A validator refusing a mode string outside `enum_cls`, listing the valid values."""
    return field_validator(what)(classmethod(lambda cls, v: parse_enum(enum_cls, v, what).value))


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
    # mps (ragsieve.tools.index.device); on a GPU a new index gets the torch-fp16 encoder
    device: str = "auto"
    embed_concurrency: int = Field(1, ge=1, le=64)  # an embeddings endpoint: requests in flight at once
    # COS-Mix sparse subset: chunks whose nearest other chunk is less similar than this corpus percentile
    sparse_percentile: float = Field(10.0, gt=0.0, lt=100.0)
    # where the index is served from (ragsieve.tools.index.backend): local | milvus; for milvus, `uri` is a
    # milvus-lite file (default <index>/milvus.db), http://host:19530 or a Zilliz URI, the token from the
    # environment variable RAGSIEVE_MILVUS_TOKEN
    encoder: Literal["torch", "torch-fp16", "onnx", "onnx-int8"] | None = None  # None: the index's recorded one, else torch-fp16 on a GPU, onnx-int8 on the CPU (torch without onnx) | torch | torch-fp16 (half precision on a GPU) | onnx (same vectors, ONNX Runtime) | onnx-int8 (int8 weights; re-embeds)
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
        from ragsieve.tools.index.device import check_spec

        return check_spec(value)

    def embedder(self, model: str | None = None, encoder: str | None = None):
        """The provider these settings name, for `ragsieve index` (queries use the one the index records)."""
        provider = self.embedding_provider or ("openai" if self.embed_base_url else "sentence-transformers")
        model, chosen = model or self.embedding_model, encoder or self.encoder
        if provider == "sentence-transformers":
            if self.embed_base_url or self.embed_dimensions:
                raise UsageError("embed_base_url / embed_dimensions need embedding_provider = \"openai\"")
            if self.embed_concurrency != 1:
                raise UsageError("embed_concurrency applies to an embeddings endpoint (embed_base_url); a local model "
                                 "keeps its device busy by itself (device, embed_batch_size)")
            from ragsieve.tools.index.dense import Embedder
            from ragsieve.tools.index.device import default_encoder_for, resolve_device

            device = resolve_device(self.device)
            return Embedder(model, batch_size=self.embed_batch_size or (512 if device.gpu else 64),
                            encoder=chosen or default_encoder_for(device), device=self.device)
        if not self.embed_base_url:
            raise UsageError("embedding_provider = \"openai\" needs embed_base_url (e.g. http://127.0.0.1:8080/v1)")
        if encoder or self.encoder != type(self).model_fields["encoder"].default:
            raise UsageError(f"encoder {chosen!r} applies to local models only, not to an embeddings endpoint")
        from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(self.embed_base_url, model, api_key_env=self.embed_api_key_env,
                              batch_size=self.embed_batch_size or 64, dimensions=self.embed_dimensions,
                              concurrency=self.embed_concurrency,
                              max_input_tokens=self.embed_max_input_tokens, timeout_s=self.embed_timeout_s,
                              max_attempts=self.embed_max_attempts, max_retry_s=self.embed_max_retry_s)


class RetrievalConfig(_Section):
    fusion: str = "weighted"  # weighted (min-max 50/50) | rrf; SciFact nDCG@10 of each: benchmarks/retrieval.py
    _fusion = _mode(FusionMode, "fusion")
    # who fuses: client | server (Milvus hybrid_search with its RRF / weighted rankers) | auto (server when
    # it is the same fusion: rrf with equal weights on milvus); server on a local index is refused
    fusion_site: str = "auto"
    _fusion_site = _mode(FusionSite, "fusion_site")
    rrf_k: int = Field(60, ge=1)
    bm25_weight: float = Field(1.0, ge=0.0)
    dense_weight: float = Field(1.0, ge=0.0)
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
    # (ragsieve.tools.index.source_first); hybrid: the fused order
    ranking: str = "hybrid"
    _ranking = _mode(RankingMode, "ranking")


class LLMConfig(_Section):
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    local_model: str = "qwen2.5-coder-0.5b"  # a named packaged model or a GGUF path
    # context of each parallel slot of the embedded server: 2 slots x 16,384 = 32,768 tokens, the packaged
    # Qwen2.5-Coder models' trained context (the coverage guarantee needs room: docs/full-plan.md)
    n_ctx: int = Field(16384, ge=512)
    context_window: int | None = Field(None, ge=512)  # a configured endpoint's context window (None: n_ctx)
    parallel: int = Field(2, ge=1, le=64)  # the embedded server's parallel slots (concurrent requests)
    n_threads: int | None = Field(None, ge=1)  # None: the cores the load leaves idle (local_server.default_threads)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1)
    # inactivity timeout: a stream is cut when no token arrives for this long; a plain call may take this long
    # in all, or (embedded model) what its measured prompt/generation rates predict when that is longer
    timeout_s: float = Field(120.0, gt=0)
    max_reply_bytes: int = Field(4_000_000, ge=1024, le=1_000_000_000)  # a longer reply body is refused
    max_prompt_tokens: int = Field(32_000, ge=256)  # a prompt over this (count_tokens) is refused before sending
    max_attempts: int = Field(5, ge=1, le=20)
    # no new attempt starts after this many seconds in all: above timeout_s, so a timed-out call is retried
    max_retry_s: float = Field(300.0, gt=0)
    output_mode: str = "auto"  # auto | json_schema | json_object | text
    cache_dir: str | None = None

    def resolved(self) -> "LLMConfig":
        env = os.environ
        return self.model_copy(update={
            "base_url": self.base_url or env.get("RAGSIEVE_BASE_URL") or env.get("OPENAI_BASE_URL"),
            "api_key": self.api_key or env.get("RAGSIEVE_API_KEY") or env.get("OPENAI_API_KEY"),
            "model": self.model or env.get("RAGSIEVE_MODEL") or env.get("OPENAI_MODEL"),
        })


class BudgetConfig(_Section):
    """What one question may spend across every step (`ragsieve.agent.llm.budget`); None: no limit."""

    deadline_s: float | None = Field(600.0, gt=0)  # wall clock for the whole question, retries included
    llm_calls: int | None = Field(100, ge=1)
    tokens: int | None = Field(400_000, ge=1000)


class LoopConfig(_Section):
    """Judge/expand loop (issue: the agentic loop)."""

    judge_batch_size: int = Field(8, ge=1)
    judge_concurrency: int = Field(2, ge=1, le=16)
    judge_chunk_chars: int = Field(1200, ge=100)
    max_iterations: int = Field(3, ge=1, le=20)
    max_llm_calls: int = Field(40, ge=1)
    max_total_tokens: int = Field(80000, ge=1000)
    expand_k: int = Field(10, ge=1)
    neighbours: bool = True
    final_k: int = Field(5, ge=1)  # context size of the `anchored` rule only
    context_order: str = "edges"  # edges | rank
    _order = _mode(ContextOrder, "context_order")
    judge_batch_chars: int = Field(8000, ge=200)  # prompt budget (chunk characters) of one judge batch
    expand_max_texts: int = Field(5, ge=1)  # relevant chunk texts added to the expansion query
    uninformative_min_n: int = Field(4, ge=2)  # all-same verdicts on >= this many chunks: no judge
    disagreement_alpha: float = Field(0.05, gt=0.0, lt=1.0)  # rank-sum test: judge vs retrieval
    judge_decoys: int = Field(3, ge=0, le=10)  # least-similar chunks hidden in each round as controls
    judge_order_check: bool = True  # first round judged again in reversed order (agent.judging, check (c))
    order_max_flips: float = Field(0.2, ge=0.0, le=1.0)  # share of verdicts allowed to change with the order
    # combination rule (agent.combine): the first-stage top `anchor_k` stay whatever the judge says;
    # a judged-relevant chunk deeper than `admit_depth` in retrieval evidence is refused (0: no limit)
    anchor_k: int = Field(3, ge=0)
    admit_depth: int = Field(0, ge=0)
    # how judged and statistical evidence make the context (ragsieve.agent.judging.combine):
    # auto (relevant or union, from the judge's recall measured by `ragsieve calibrate --judge N`; see
    # ragsieve.agent.judging.reliability) | relevant (the trusted relevant set) | union (relevant set +
    # the conformal set) | anchored (fixed final_k)
    combine: str = "auto"
    trust_margin: float = Field(0.02, ge=0.0, le=1.0)  # auto: recall the relevant set may lose against fast
    trust_min_n: int = Field(20, ge=1)  # auto: judge measured on fewer questions -> union
    _combine = _mode(ContextRule, "combine")
    # token budget of the context, best evidence first; None: follows the model's context window
    # (llm.context_window or the embedded server's n_ctx) less the reply (llm.max_tokens) and PROMPT_RESERVE
    context_tokens: int | None = Field(None, ge=100, le=2_000_000)


class FallbackConfig(_Section):
    rerank_model: str = "ms-marco-TinyBERT-L-2-v2"

    @field_validator("rerank_model")
    @classmethod
    def _known_reranker(cls, value: str) -> str:
        if value not in FLASHRANK_MODELS:
            raise UsageError(f"invalid rerank_model {value!r}: choose one of {', '.join(FLASHRANK_MODELS)}")
        return value
    rerank_cache_dir: str | None = None
    rerank_download: bool = False  # fetch an uncached FlashRank model from its hub (the only network use)
    sparse_candidates: int = Field(10, ge=1)
    max_added: int = Field(2, ge=1)  # sparse chunks the fallback may add to the context
    distance_weight: float = Field(0.5, ge=0.0, le=10.0)  # COS-Mix score: cos(q, c) + w * (1 - nearest-neighbour cos)


class RerankConfig(_Section):
    """The reranker (ragsieve.tools.rerankers) of the `rerank` step and of the fallback. None: no reranker (the
    `rerank` step is refused; the fallback uses FlashRank when cached, else embedding order, and says so)."""

    provider: Literal["cross-encoder", "flashrank", "http"] | None = None
    model: str | None = None  # a CrossEncoder folder or hub name | a FlashRank model | the model at base_url
    base_url: str | None = None  # http: the /rerank endpoint or its root
    style: Literal["cohere", "tei"] = "cohere"  # http: Cohere/Jina/vLLM/Infinity/llama.cpp shape, or TEI's
    api_key_env: str = "RAGSIEVE_RERANK_API_KEY"  # http: the variable holding the key (never the key)
    allow_download: bool = False  # hub name / FlashRank: fetch an uncached model once (the only network use)
    cache_dir: str | None = None  # flashrank: its model cache
    max_length: int = Field(512, ge=16, le=8192)  # tokens of (query, passage) a local model reads
    batch_size: int = Field(32, ge=1, le=1024)
    depth: int | None = Field(None, ge=1, le=1000)  # pool hits re-scored (None: the whole retrieval.pool)
    keep: int | None = Field(None, ge=1, le=1000)  # context after reranking (None: retrieval.top_k)
    timeout_s: float = Field(60.0, gt=0)  # http: the chat calls' rules (attempt, attempts, total retry time)
    max_attempts: int = Field(5, ge=1, le=20)
    max_retry_s: float = Field(150.0, gt=0)
    device: str | None = None  # cross-encoder: auto | cpu | cuda[:N] | mps; None: the [index] device

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        from ragsieve.tools.index.device import check_spec

        return None if value is None else check_spec(value)

    def options(self, index_device: str = "auto") -> dict:
        """The provider's options (`ragsieve.tools.rerankers.open_reranker`), only those it takes; a local
        cross-encoder runs on `device`, else on `index_device` (the one query embedding uses)."""
        if self.device is not None and self.provider != "cross-encoder":
            raise UsageError(f"[rerank] device applies to provider \"cross-encoder\", not {self.provider!r} "
                             "(flashrank runs on the CPU; an http reranker runs where its server does)")
        if self.provider == "http":
            if not self.base_url:
                raise UsageError("[rerank] provider = \"http\" needs base_url (the /rerank endpoint)")
            return {"base_url": self.base_url, "style": self.style, "api_key_env": self.api_key_env,
                    "batch_size": self.batch_size, "timeout_s": self.timeout_s, "max_attempts": self.max_attempts,
                    "max_retry_s": self.max_retry_s}
        if self.base_url:
            raise UsageError(f"[rerank] base_url applies to provider \"http\", not {self.provider!r}")
        if self.provider == "flashrank":
            return {"cache_dir": self.cache_dir, "max_length": self.max_length, "allow_download": self.allow_download}
        return {"max_length": self.max_length, "batch_size": self.batch_size, "allow_download": self.allow_download,
                "device": self.device or index_device}


class ConformalConfig(_Section):
    """Conformal threshold step (needs `ragsieve calibrate`; without a calibration it passes through)."""

    enabled: bool = True
    min_keep: int = Field(0, ge=0)  # when nothing passes, keep this many best chunks (0: say there is no evidence)
    alpha: float | None = Field(None, gt=0.0, lt=1.0)  # None: the calibrated alpha; else q is recomputed
    score_kind: Literal["raw", "gap", "ratio", "rank", "hybrid-rank", "hybrid-ratio"] | None = None  # None: the kind chosen by calibrate
    # pool: keep every passing pool chunk; corpus: also passing chunks beyond the pool (CONFLARE's threshold
    # retrieval over the index, the best `corpus_max` by similarity); context: narrow the context only
    candidates: Literal["context", "pool", "corpus"] = "corpus"
    corpus_max: int = Field(100, ge=1, le=10000)


class AbstentionConfig(_Section):
    """Calibrated abstention (ragsieve.tools.filters.abstention, needs `ragsieve calibrate`): the model's
    abstention stands unless the calibrated answerability score says answerable at this false-answer rate."""

    max_false_answer: float = Field(0.02, gt=0.0, lt=1.0)  # P(overruling an abstention on an unanswerable question)
    overrule: Literal["passages", "never"] = "passages"  # passages: reply with the passages, labelled as such
    passages: int = Field(3, ge=0, le=20)  # closest passages listed under an abstention, marked as not an answer
    # the reply's sources also list the context's top N passages the answer did not cite, marked as retrieved and
    # not cited (agent/also_retrieved.py): the sources then hold the top passages whatever a weak model cites
    # (under an abstention only when `passages` > 0)
    also_retrieved: int = Field(5, ge=0, le=20)
    # an answer that cites none of the passages (agent/grounding.py) is replaced by the abstention with the closest
    # passages; off by default (the answer is then marked `grounding: none`); the widget asks for it by default
    strict: bool = False


class OutlierConfig(_Section):
    """GMM outlier filter (Bulgakov 2024); settings are the paper's. Off by default: measured after the conformal
    step on HotpotQA it changed nothing with the oracle judge and lowered gold recall with noisy ones
    (flip10 0.879 -> 0.864, flip25 0.908 -> 0.879; benchmarks/results/pipeline-gmm-stage.json). `standardize` (eq. 9)
    stays off: Table 1 at n = 60 per question type showed no gain from it (benchmarks/results/filters-gmm*.json)."""

    enabled: bool = False
    method: Literal["concatenate", "weighted_sum", "interaction", "polynomial"] = "interaction"
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    degree: int = Field(2, ge=1, le=6)
    pca_dims: list[int] = Field(default_factory=lambda: [2, 3], min_length=1)
    n_components: list[int] = Field(default_factory=lambda: [4, 5, 6], min_length=1)
    percentile: float = Field(15.0, gt=0.0, lt=100.0)
    min_outlier_freq: int = Field(4, ge=1)  # the paper's better setting: flagged in >= 4 of the K x PCA runs
    standardize: bool = False  # standardise features before PCA (makes alpha a no-op except for weighted_sum)
    seed: int = 0
    fit_candidates: int = Field(20, ge=1)  # the GMM is fitted on the context plus the best pool chunks up to this many
    # never flag the best N: from the authors' public code for arXiv:2407.01403 (its run script's
    # `excluded_outlier_idxs = [0, 1, 2, 3]`), not in the paper, which flags every candidate; measured without it,
    # a top-4 chunk was flagged in 5 of 8 trial questions (issue 23)
    protect_top: int = Field(4, ge=0)
    plot: str | None = None  # write the paper's Figure-2 style PNG here


class SegmentConfig(_Section):
    """Relevant segment extraction (dsRAG RSE); None fields take the preset's value."""

    enabled: bool = True
    preset: Literal["default", "balanced", "precision", "find_all"] = "default"
    max_length: int | None = Field(None, ge=1)
    overall_max_length: int | None = Field(None, ge=1)
    minimum_value: float | None = None
    irrelevant_chunk_penalty: float | None = Field(None, ge=0.0)
    decay_rate: float | None = Field(None, gt=0.0)
    relevance: Literal["auto", "calibrated", "cosine"] = "auto"  # auto: calibrated when calibration.json exists
    cosine_low: float = Field(0.1, ge=-1.0, le=1.0)
    cosine_high: float = Field(0.7, ge=-1.0, le=1.0)
    chunk_length_adjustment: bool = True  # dsRAG: value * max(chars, 700) / 700
    # keep context chunks with evidence (conformal set, trusted judge, fallback) outside every segment;
    # false: dsRAG alone decides (measured: costs 5-11 points of HotpotQA gold recall with noisy judges,
    # benchmarks/results/pipeline-rse-dsrag-only.json)
    keep_evidence: bool = True
    merge: bool = True  # one passage per segment (text rebuilt from the chunk store) or one per chunk


class InsightsConfig(_Section):
    """The question log behind `ragsieve insights` and `/insights` (ragsieve.agent.insights). Off by default;
    texts are redacted (e-mails, phone numbers, tokens, key-like strings) before anything is written."""

    enabled: bool = False
    indexes: list[str] = Field(default_factory=list)  # the served indexes logged; empty: every one
    retention_days: float = Field(default=90.0, gt=0, le=3650)  # older rows are deleted
    store_answers: bool = False  # also keep the (redacted) answer text
    # average cosine distance under which questions share a topic (average linkage); 0.75 joins MiniLM paraphrases
    # of one missing topic (similarities 0.15-0.6) and keeps two unrelated topics apart (tests/test_insights.py)
    group_distance: float = Field(default=0.75, gt=0.0, lt=2.0)
    dir: str | None = None  # where insights.sqlite3 lives (None: the server's --data-dir)

    def logs(self, index: str) -> bool:
        return self.enabled and (not self.indexes or index in self.indexes)


class PlanSpec(_Section):
    """A plan as data: the first step and, per step, where each outcome leads ("end" stops)."""

    start: str
    transitions: dict[str, dict[str, str]]


class Config(_Section):
    index: IndexConfig = Field(default_factory=IndexConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    conformal: ConformalConfig = Field(default_factory=ConformalConfig)
    outliers: OutlierConfig = Field(default_factory=OutlierConfig)
    abstention: AbstentionConfig = Field(default_factory=AbstentionConfig)
    segments: SegmentConfig = Field(default_factory=SegmentConfig)
    insights: InsightsConfig = Field(default_factory=InsightsConfig)
    plan: str = "fast"
    max_steps: int = Field(40, ge=1, le=1000)
    plans: dict[str, PlanSpec] = Field(default_factory=dict)

    def context_budget(self) -> int:
        """The context's token budget: `loop.context_tokens`, or the model's window less the reply and prompt."""
        if self.loop.context_tokens is not None:
            return self.loop.context_tokens
        window = self.llm.context_window or self.llm.n_ctx
        return max(100, window - self.llm.max_tokens - PROMPT_RESERVE)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Config":
        if path is None:
            return cls()
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"config file not found: {p}")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"config file {p} is not valid TOML: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:  # one line: `llm.n_threads: Input should be ... (got 0)`
            problems = "; ".join(f"{'.'.join(str(part) for part in err['loc']) or 'config'}: {err['msg']}"
                                 f" (got {err.get('input')!r:.60})" for err in exc.errors())
            raise UsageError(f"config file {p}: {problems}") from None
        except UsageError as exc:
            raise UsageError(f"config file {p}: {exc}") from exc
