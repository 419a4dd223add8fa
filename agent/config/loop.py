"""The `[loop]`, `[fallback]` and `[rerank]` sections: the judge/expand loop, the sparse fallback, the reranker."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ragsieve.agent.config.base import _mode, _Section
from ragsieve.agent.errors import UsageError
from ragsieve.agent.modes import ContextRule
from ragsieve.tools.modes import FLASHRANK_MODELS, ContextOrder, check_spec


class LoopConfig(_Section):
    """Judge/expand loop (issue: the agentic loop)."""

    # one listwise prompt holds the pool (retrieval.pool, 20) and the decoys (judge_decoys, 3), as RankGPT's window
    # of 20 does, so a round is one call and the order check reverses the whole list (issue 56: batches of 8 made
    # the oracle's `full` 10 calls a question); judge_batch_chars keeps that prompt near 6k tokens, inside the
    # default 16k window
    judge_batch_size: int = Field(24, ge=1)
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
    judge_batch_chars: int = Field(24000, ge=200)  # prompt budget (chunk characters) of one judge batch
    expand_max_texts: int = Field(5, ge=1)  # relevant chunk texts added to the expansion query
    # all true on >= this many chunks, or all false in the first round with no decoys shown: no judge (a first
    # round judged all false by a judge that passed its decoys and order check is trusted: nothing relevant)
    uninformative_min_n: int = Field(4, ge=2)
    disagreement_alpha: float = Field(0.05, gt=0.0, lt=1.0)  # rank-sum test: judge vs retrieval
    judge_decoys: int = Field(3, ge=0, le=10)  # least-similar chunks hidden in each round as controls
    judge_order_check: bool = True  # first round judged again in reversed order (agent.judging, check (c))
    order_max_flips: float = Field(0.2, ge=0.0, le=1.0)  # share of the re-judged verdicts allowed to change with the order
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
    # auto: when the judge's measured recall (answer's chunk in the pool and judged relevant), bounded below at
    # this confidence (Clopper-Pearson), reaches 1 - alpha, the relevant set stands alone without the conformal
    # set; false: every context keeps the conformal set (a distribution-free guarantee, more context tokens)
    relevant_alone: bool = True
    trust_confidence: float = Field(0.95, gt=0.5, lt=1.0)
    # auto: a judge whose rate of calling calibration decoys relevant, bounded below at trust_confidence,
    # exceeds this decides nothing (ragsieve.agent.judging.bounds.judge_barred); 1.0: never barred
    trust_decoy_rate: float = Field(0.1, ge=0.0, le=1.0)
    # auto: the same line for the near misses (the pool's chunks calibration labels as not answer-bearing): a judge
    # whose rate of calling them relevant, bounded below at trust_confidence, exceeds it decides nothing (issue 56;
    # the decoys cannot catch a judge that rejects only text sharing nothing with the question); 1.0: never barred
    trust_near_miss_rate: float = Field(0.1, ge=0.0, le=1.0)
    # the validation prompt reads the passages the answer cites and this many of the context's best others
    # (issue 56: not the whole context). 0: the cited passages only, the evidence the answer claims (the answer
    # prompt asks a citation for every fact; an uncited claim has no support to check, so it is unresolved)
    validate_extra: int = Field(0, ge=0, le=50)
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
        return None if value is None else check_spec(value)

    def options(self, index_device: str = "auto") -> dict:
        """The provider's options (`ragsieve.tools.rerankers.open_reranker`), only those it takes; a local
        cross-encoder runs on `device`, else on `index_device` (the one query embedding uses)."""
        if self.device is not None and self.provider != "cross-encoder":
            raise UsageError(
                f'[rerank] device applies to provider "cross-encoder", not {self.provider!r} '
                "(flashrank runs on the CPU; an http reranker runs where its server does)"
            )
        if self.provider == "http":
            if not self.base_url:
                raise UsageError('[rerank] provider = "http" needs base_url (the /rerank endpoint)')
            return {
                "base_url": self.base_url,
                "style": self.style,
                "api_key_env": self.api_key_env,
                "batch_size": self.batch_size,
                "timeout_s": self.timeout_s,
                "max_attempts": self.max_attempts,
                "max_retry_s": self.max_retry_s,
            }
        if self.base_url:
            raise UsageError(f'[rerank] base_url applies to provider "http", not {self.provider!r}')
        if self.provider == "flashrank":
            return {"cache_dir": self.cache_dir, "max_length": self.max_length, "allow_download": self.allow_download}
        return {
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "allow_download": self.allow_download,
            "device": self.device or index_device,
        }
