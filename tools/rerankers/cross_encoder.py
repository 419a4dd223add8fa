"""The sentence-transformers `CrossEncoder` reranker: a local model folder, or a hub name already cached.

Any cross-encoder sentence-transformers can load (bge-reranker, ms-marco
MiniLM, mxbai-rerank ...): a folder is loaded from disk with
`local_files_only`; a hub name is looked up in the Hugging Face cache and
downloaded only when `allow_download` is set (the only network use). A model
that cannot be loaded raises `ModelUnavailableError` naming what was tried.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import ModelUnavailableError, UsageError

log = logging.getLogger(__name__)


class CrossEncoderProvider:
    kind = "cross-encoder"

    def __init__(
        self, model: str, *, max_length: int = 512, batch_size: int = 16, allow_download: bool = False, device: str = "cpu"
    ) -> None:
        if not model or not str(model).strip():
            raise UsageError("the cross-encoder reranker needs a model: a local folder or a hub name ([rerank] model)")
        if not 16 <= max_length <= 8192:
            raise UsageError(f"invalid rerank max_length {max_length!r}: must be in 16..8192")
        if batch_size < 1:
            raise UsageError(f"invalid rerank batch_size {batch_size!r}: must be >= 1")
        self.model = str(model)
        from ragsieve.tools.index.embedders.device import resolve_device

        # auto: a GPU torch sees, else the CPU; a GPU named but absent is refused here, in one line
        self.max_length, self.batch_size, self.device = int(max_length), int(batch_size), str(resolve_device(device))
        self.allow_download = allow_download
        self._model: Any = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"cross-encoder {self.model} on {self.device}"

    def load(self) -> None:
        with self._lock:
            if self._model is None:
                self._model = self._build()

    def _build(self) -> Any:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise ModelUnavailableError(
                "the cross-encoder reranker needs sentence-transformers: pip install sentence-transformers"
            ) from exc
        folder = Path(self.model).expanduser()
        local = folder.is_dir()
        if not local and self.model.startswith((".", "/", "~")):
            raise ModelUnavailableError(f"cross-encoder folder {folder} does not exist")
        try:
            return CrossEncoder(
                str(folder) if local else self.model,
                max_length=self.max_length,
                device=self.device,
                local_files_only=local or not self.allow_download,
            )
        except (OSError, ValueError, RuntimeError, KeyError) as exc:
            where = (
                f"folder {folder}"
                if local
                else (
                    f"hub name {self.model!r} ("
                    + (
                        "download failed"
                        if self.allow_download
                        else "not in the Hugging Face cache; no download attempted — set "
                        "[rerank] allow_download = true to fetch it once"
                    )
                    + ")"
                )
            )
            raise ModelUnavailableError(
                f"cross-encoder {where} cannot be loaded: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300] if str(exc) else ''}"
            ) from None

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.load()
        if not texts:
            return []
        scores = self._model.predict(
            [(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in scores.reshape(len(texts), -1)[:, -1]]
