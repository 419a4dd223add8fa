"""The reranker a plan uses, shared by the `rerank` step and the sparse fallback (`ragsieve.tools.rerankers`):
the configured one, loaded once per process and settings and refused before any call when it cannot load;
for the fallback, else the lenient FlashRank default."""

from __future__ import annotations

from ragsieve.agent.config import Config
from ragsieve.agent.core.caches import StepCaches
from ragsieve.agent.core.contracts import Reranker as RerankerLike
from ragsieve.agent.errors import UsageError
from ragsieve.tools.errors import ModelUnavailableError


def reranker_for(config: Config) -> RerankerLike:
    """The configured reranker, loaded (once per process and settings); UsageError saying why when it cannot run."""
    from ragsieve.tools.rerankers import open_reranker

    cfg = config.rerank
    if cfg.provider is None:
        raise UsageError(
            'no reranker is configured: set [rerank] provider = "cross-encoder" (model = a local '
            'folder or a hub name), "flashrank" or "http" (base_url = a /rerank endpoint)'
        )
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
    return caches.lenient_reranker.get(
        key, lambda: Reranker(fb.rerank_model, fb.rerank_cache_dir, allow_download=fb.rerank_download)
    )
