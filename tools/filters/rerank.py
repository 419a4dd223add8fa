"""FlashRank cross-encoder reranking, with an explicit embedding-similarity fallback.

`Reranker.run(query, hits)` scores (query, chunk) pairs with a FlashRank
ONNX cross-encoder (`flashrank.Ranker(model_name=..., cache_dir=...)`; the
default TinyBERT-L-2 is the ms-marco cross-encoder FlashRank ships). The
model is loaded on the first call. When it cannot be obtained (FlashRank not
installed, no network to download it, a broken cache, or HF_HUB_OFFLINE set
while the model is not cached) the hits are ordered by their `dense_score`
(cosine similarity of query and chunk embeddings) instead, and the result
says so: `method="embedding"` and a `note` naming the reason. Never silently.

FlashRank calls `logging.basicConfig` when a Ranker is built; we keep that
from configuring the application's root logger by holding a temporary
NullHandler on it during construction (basicConfig is a no-op when the root
logger has a handler) and removing it right after.
"""
from __future__ import annotations

import logging
import os
import threading
import zipfile
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ragsieve.tools.errors import UsageError
from ragsieve.tools.types import Hit

log = logging.getLogger(__name__)

# The pairwise (ONNX) models FlashRank knows; the listwise LLM ranker needs llama_cpp and is refused.
FLASHRANK_MODELS = (
    "ms-marco-TinyBERT-L-2-v2",
    "ms-marco-MiniLM-L-12-v2",
    "ms-marco-MultiBERT-L-12",
    "rank-T5-flan",
    "ce-esci-MiniLM-L12-v2",
    "miniReranker_arabic_v1",
)


class RerankMethod(str, Enum):
    FLASHRANK = "flashrank"
    EMBEDDING = "embedding"


class RerankResult(BaseModel):
    hits: list[Hit] = Field(default_factory=list)  # best first; rank = new position, extra["rerank_score"]
    method: RerankMethod
    note: str = ""


class Reranker:
    """Reorders hits for a query. `cache_dir=None` uses FlashRank's default folder."""

    def __init__(self, model_name: str = "ms-marco-TinyBERT-L-2-v2", cache_dir: str | Path | None = None,
                 max_length: int = 512, allow_download: bool = False):
        if model_name not in FLASHRANK_MODELS:
            raise UsageError(f"invalid rerank model {model_name!r}: choose one of {', '.join(FLASHRANK_MODELS)}")
        if not 16 <= max_length <= 4096:
            raise UsageError(f"invalid rerank max_length {max_length!r}: must be in 16..4096")
        self.model_name = model_name
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_length = max_length
        self.allow_download = allow_download  # never reach the network unless asked (fallback.rerank_download)
        self._lock = threading.Lock()
        self._ranker: Any = None
        self._unavailable: str | None = None

    def run(self, query: str, hits: list[Hit]) -> RerankResult:
        ranker = self._load()
        if ranker is None:
            return self._by_embedding(hits, f"FlashRank model {self.model_name} unavailable "
                                            f"({self._unavailable}); ordered by embedding similarity")
        if not hits:
            return RerankResult(hits=[], method=RerankMethod.FLASHRANK, note="no hits to rerank")
        from flashrank import RerankRequest

        passages = [{"id": i, "text": h.chunk.text} for i, h in enumerate(hits)]
        ranked = ranker.rerank(RerankRequest(query=query, passages=passages))
        out = [_restamp(hits[p["id"]], rank, float(p["score"])) for rank, p in enumerate(ranked, start=1)]
        return RerankResult(hits=out, method=RerankMethod.FLASHRANK, note=f"flashrank {self.model_name}")

    # -- internals ---------------------------------------------------------
    def _load(self) -> Any:
        with self._lock:
            if self._ranker is not None or self._unavailable is not None:
                return self._ranker
            try:
                self._ranker = self._build()
            except ImportError as exc:
                self._unavailable = f"flashrank is not installed ({exc}); install it with `pip install flashrank`"
            except (OSError, RuntimeError, ValueError, KeyError, zipfile.BadZipFile) as exc:
                self._unavailable = f"{type(exc).__name__}: {str(exc)[:300]}"
            if self._unavailable:
                log.warning("reranker %s unavailable: %s", self.model_name, self._unavailable)
            return self._ranker

    def _build(self) -> Any:
        from flashrank import Ranker
        from flashrank.Config import default_cache_dir, model_file_map

        cache = self.cache_dir if self.cache_dir is not None else Path(default_cache_dir)
        model_file = cache / self.model_name / model_file_map[self.model_name]
        if not model_file.is_file() and os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
            raise OSError(f"not cached at {model_file} and HF_HUB_OFFLINE is set (no download attempted)")
        if not model_file.is_file() and not self.allow_download:
            raise OSError(f"not cached at {model_file}; no download attempted (set fallback.rerank_download = "
                          f"true to fetch it from FlashRank's hub once)")
        root = logging.getLogger()
        guard = logging.NullHandler()
        root.addHandler(guard)  # makes flashrank's logging.basicConfig a no-op
        try:
            return Ranker(model_name=self.model_name, cache_dir=str(cache), max_length=self.max_length,
                          log_level="WARNING")
        finally:
            root.removeHandler(guard)

    @staticmethod
    def _by_embedding(hits: list[Hit], note: str) -> RerankResult:
        missing = sum(1 for h in hits if h.dense_score is None)
        if missing:
            note += f"; {missing} hit(s) without dense_score placed last"
        order = sorted(range(len(hits)), key=lambda i: (hits[i].dense_score is None,
                                                         -(hits[i].dense_score or 0.0), i))
        out = [_restamp(hits[i], rank, hits[i].dense_score) for rank, i in enumerate(order, start=1)]
        return RerankResult(hits=out, method=RerankMethod.EMBEDDING, note=note)


def _restamp(hit: Hit, rank: int, score: float | None) -> Hit:
    extra = dict(hit.extra)
    if score is not None:
        extra["rerank_score"] = float(score)
    return hit.model_copy(update={"rank": rank, "extra": extra})
