"""FlashRank's ONNX cross-encoders as a reranker provider: cached models only, unless a download is allowed.

`flashrank.Ranker(model_name=..., cache_dir=...)` downloads an uncached model
from FlashRank's hub; this provider never lets it try unless `allow_download`
is set (and never while HF_HUB_OFFLINE is set): an uncached model raises
`ModelUnavailableError` saying where it looked. FlashRank calls
`logging.basicConfig` when a Ranker is built; a temporary NullHandler on the
root logger during construction makes that a no-op (basicConfig does nothing
when the root logger has a handler), so the application's logging is untouched.
"""

from __future__ import annotations

import logging
import os
import threading
import zipfile
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import ModelUnavailableError, UsageError
from ragsieve.tools.modes import FLASHRANK_MODELS


class FlashRankProvider:
    kind = "flashrank"

    def __init__(
        self,
        model: str = "ms-marco-TinyBERT-L-2-v2",
        *,
        cache_dir: str | Path | None = None,
        max_length: int = 512,
        allow_download: bool = False,
        download_setting: str = "[rerank] allow_download",
    ) -> None:
        if model not in FLASHRANK_MODELS:
            raise UsageError(f"invalid rerank model {model!r}: choose one of {', '.join(FLASHRANK_MODELS)}")
        if not 16 <= max_length <= 4096:
            raise UsageError(f"invalid rerank max_length {max_length!r}: must be in 16..4096")
        self.model = model
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_length = max_length
        self.allow_download = allow_download
        self.download_setting = download_setting  # named in the refusal: the setting that would allow it
        self._lock = threading.Lock()
        self._ranker: Any = None

    def describe(self) -> str:
        return f"flashrank {self.model}"

    def load(self) -> None:
        with self._lock:
            if self._ranker is not None:
                return
            try:
                self._ranker = self._build()
            except ImportError as exc:
                raise ModelUnavailableError(f"flashrank is not installed ({exc}); pip install flashrank") from None
            except (OSError, RuntimeError, ValueError, KeyError, zipfile.BadZipFile) as exc:
                raise ModelUnavailableError(
                    f"FlashRank model {self.model} unavailable: {type(exc).__name__}: {str(exc)[:300]}"
                ) from None

    def _build(self) -> Any:
        from flashrank import Ranker
        from flashrank.Config import default_cache_dir, model_file_map

        cache = self.cache_dir if self.cache_dir is not None else Path(default_cache_dir)
        model_file = cache / self.model / model_file_map[self.model]
        if not model_file.is_file() and os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
            raise OSError(f"not cached at {model_file} and HF_HUB_OFFLINE is set (no download attempted)")
        if not model_file.is_file() and not self.allow_download:
            raise OSError(
                f"not cached at {model_file}; no download attempted (set {self.download_setting} = "
                f"true to fetch it from FlashRank's hub once)"
            )
        root = logging.getLogger()
        guard = logging.NullHandler()
        root.addHandler(guard)  # makes flashrank's logging.basicConfig a no-op
        try:
            return Ranker(model_name=self.model, cache_dir=str(cache), max_length=self.max_length, log_level="WARNING")
        finally:
            root.removeHandler(guard)

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.load()
        if not texts:
            return []
        from flashrank import RerankRequest

        ranked = self._ranker.rerank(RerankRequest(query=query, passages=[{"id": i, "text": t} for i, t in enumerate(texts)]))
        scores = {int(p["id"]): float(p["score"]) for p in ranked}
        return [scores[i] for i in range(len(texts))]
