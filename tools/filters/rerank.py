"""The fallback's default reranker: FlashRank when its model is cached, else an explicit embedding order.

`Reranker.run(query, hits)` scores (query, chunk) pairs with a FlashRank ONNX
cross-encoder (`ragsieve.tools.rerankers.flashrank_provider`; the default
TinyBERT-L-2 is the ms-marco cross-encoder FlashRank ships), loaded on the
first call. When it cannot be obtained (FlashRank not installed, not cached
and no download allowed, HF_HUB_OFFLINE set, a broken cache) the hits are
ordered by their `dense_score` (cosine similarity of query and chunk
embeddings) instead, and the result says so: `method="embedding"` and a
`note` naming the reason. Never silently. This lenient path is used only when
no reranker is configured; a configured one (`[rerank] provider`,
`ragsieve.tools.rerankers`) must load or the plan is refused.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ragsieve.tools.errors import ModelUnavailableError
from ragsieve.tools.rerankers.base import ProviderReranker, RerankMethod, RerankResult, restamp
from ragsieve.tools.rerankers.flashrank_provider import FLASHRANK_MODELS, FlashRankProvider
from ragsieve.tools.types import Hit

__all__ = ["FLASHRANK_MODELS", "Reranker", "RerankMethod", "RerankResult"]

log = logging.getLogger(__name__)


class Reranker:
    """Reorders hits for a query. `cache_dir=None` uses FlashRank's default folder."""

    def __init__(
        self,
        model_name: str = "ms-marco-TinyBERT-L-2-v2",
        cache_dir: str | Path | None = None,
        max_length: int = 512,
        allow_download: bool = False,
    ) -> None:
        self.provider = FlashRankProvider(
            model_name,
            cache_dir=cache_dir,
            max_length=max_length,
            allow_download=allow_download,
            download_setting="fallback.rerank_download",
        )
        self.model_name = model_name
        self._lock = threading.Lock()
        self._unavailable: str | None = None

    def run(self, query: str, hits: list[Hit]) -> RerankResult:
        if not self._available():
            return self._by_embedding(hits, f"reranker unavailable ({self._unavailable}); ordered by embedding similarity")
        return ProviderReranker(self.provider).run(query, hits)

    def _available(self) -> bool:
        with self._lock:  # a failure is remembered: no second download attempt
            if self._unavailable is None:
                try:
                    self.provider.load()
                except ModelUnavailableError as exc:
                    self._unavailable = str(exc)
                    log.warning("reranker %s unavailable: %s", self.model_name, self._unavailable)
            return self._unavailable is None

    @staticmethod
    def _by_embedding(hits: list[Hit], note: str) -> RerankResult:
        missing = sum(1 for h in hits if h.dense_score is None)
        if missing:
            note += f"; {missing} hit(s) without dense_score placed last"
        order = sorted(range(len(hits)), key=lambda i: (hits[i].dense_score is None, -(hits[i].dense_score or 0.0), i))
        out = [restamp(hits[i], rank, hits[i].dense_score) for rank, i in enumerate(order, start=1)]
        return RerankResult(hits=out, method=RerankMethod.EMBEDDING, note=note)
