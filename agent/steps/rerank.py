"""The `rerank` step: a cross-encoder (or a /rerank endpoint) re-scores the first-stage pool and keeps the best.

Retrieve-then-rerank (Nogueira & Cho, "Passage Re-ranking with BERT", 2019):
the pool's first `rerank.depth` hits (default: the whole `retrieval.pool`)
are scored as (question, passage) pairs by the configured provider
(`[rerank]`, `ragsieve.tools.rerankers`); the pool, the first-stage order and
the context (`rerank.keep`, default `retrieval.top_k`) then follow the new
order, so every later step (judge, conformal, answer) and `ragsieve eval`'s
first-stage metrics see the reranked list. The trace names the reranker that
ran and each hit's rank before and after. A plan holding this step (or the
fallback, with a reranker configured) is refused before any call when the
reranker cannot load: never a silent fallback to another order.
"""
from __future__ import annotations

from ragsieve.agent.config import Config
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.caches import StepCaches
from ragsieve.agent.plan.contracts import Reranker as RerankerLike
from ragsieve.agent.plan.runner import Deps, Step, StepResult, register
from ragsieve.agent.plan.state import RunState
from ragsieve.tools.errors import ModelUnavailableError


def reranker_for(config: Config):
    """The configured reranker, loaded (once per process and settings); UsageError saying why when it cannot run."""
    from ragsieve.tools.rerankers import open_reranker

    cfg = config.rerank
    if cfg.provider is None:
        raise UsageError("no reranker is configured: set [rerank] provider = \"cross-encoder\" (model = a local "
                         "folder or a hub name), \"flashrank\" or \"http\" (base_url = a /rerank endpoint)")
    try:
        return open_reranker(cfg.provider, cfg.model, **cfg.options(config.index.device))
    except ModelUnavailableError as exc:
        raise UsageError(f"the configured reranker ({cfg.provider} {cfg.model or ''}) cannot load: {exc}") from None


def fallback_reranker(config: Config, caches: StepCaches) -> RerankerLike:
    """The fallback's reranker: the caller's (`caches.reranker`: tests, an application), else the configured one
    when there is one (strict), else FlashRank when cached, else the embedding order (the lenient default of
    `ragsieve.tools.filters.rerank`, kept in `caches.lenient_reranker`)."""
    if caches.reranker is not None:
        return caches.reranker
    if config.rerank.provider is not None:
        return reranker_for(config)
    from ragsieve.tools.filters.rerank import Reranker

    fb = config.fallback
    key = (fb.rerank_model, fb.rerank_cache_dir, fb.rerank_download)
    return caches.lenient_reranker.get(key, lambda: Reranker(fb.rerank_model, fb.rerank_cache_dir,
                                                             allow_download=fb.rerank_download))


@register
class Rerank(Step):
    name = "rerank"

    @classmethod
    def check_config(cls, config: Config) -> None:
        reranker_for(config)

    def run(self, state: RunState, deps: Deps) -> StepResult:
        cfg, retrieval = deps.config.rerank, deps.config.retrieval
        reranker = reranker_for(deps.config)
        depth = min(cfg.depth or len(state.candidates), len(state.candidates))
        scored, rest = state.candidates[:depth], state.candidates[depth:]
        result = reranker.run(state.question, scored)
        ranked = result.hits
        for hit in ranked:
            state.pool[hit.chunk_id] = hit
        keep = cfg.keep or retrieval.top_k
        state.candidates = ranked + rest
        moved = [h.chunk_id for h in ranked]
        state.first_stage = moved + [c for c in state.first_stage if c not in set(moved)]
        state.context = ranked[:keep]
        return StepResult("next", {
            "reranker": result.note, "provider": result.method.value, "scored": len(ranked), "kept": keep,
            "not_scored": len(rest),
            "ranks": [{"id": h.chunk_id, "before": int(h.extra.get("rank_before", 0)) or None, "after": h.rank,
                       "score": round(h.extra.get("rerank_score", 0.0), 5)} for h in ranked],
        })
