"""Open a reranker provider by kind, once per process and settings (a loaded model is reused across questions)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ragsieve.tools.errors import UsageError
from ragsieve.tools.rerankers.base import ProviderReranker, RerankProvider

KINDS = ("cross-encoder", "flashrank", "http")
_OPEN: OrderedDict[tuple, ProviderReranker] = OrderedDict()
_LOCK = threading.Lock()
MAX_OPEN = 4


def _provider(kind: str, model: str | None, options: dict[str, Any]) -> RerankProvider:
    if kind == "cross-encoder":
        from ragsieve.tools.rerankers.cross_encoder import CrossEncoderProvider

        return CrossEncoderProvider(model or "", **options)
    if kind == "flashrank":
        from ragsieve.tools.rerankers.flashrank_provider import FlashRankProvider

        return FlashRankProvider(model or "ms-marco-TinyBERT-L-2-v2", **options)
    if kind == "http":
        from ragsieve.tools.rerankers.http_rerank import HTTPRerankProvider

        return HTTPRerankProvider(options.pop("base_url", None) or "", model, **options)
    raise UsageError(f"invalid reranker provider {kind!r}: choose one of {', '.join(KINDS)}")


def open_reranker(kind: str, model: str | None = None, **options: Any) -> ProviderReranker:
    """The reranker `kind` (cross-encoder | flashrank | http) with `model`, loaded now: raises
    ModelUnavailableError (or UsageError for bad settings) when it cannot run. The last MAX_OPEN are kept."""
    key = (kind, model, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _LOCK:
        if key in _OPEN:
            _OPEN.move_to_end(key)
            return _OPEN[key]
    provider = _provider(kind, model, dict(options))
    provider.load()
    reranker = ProviderReranker(provider)
    with _LOCK:
        _OPEN[key] = reranker
        while len(_OPEN) > MAX_OPEN:
            _OPEN.popitem(last=False)
    return reranker
