"""Which sentence-transformers encoder a build uses, on which device: the one an existing index records, else
the default for the device."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.embedders.device import Device, default_encoder_for, place_encoder, resolve_device
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.local.generations import MANIFEST, live_generation, read_manifest

log = logging.getLogger(__name__)


def recorded_encoder(root: Path) -> str | None:
    """The encoder the live generation of `root` was embedded with (None: no index yet)."""
    gen = live_generation(root)
    if gen is None or not (gen / MANIFEST).is_file():
        return None
    embedding = read_manifest(gen).get("embedding", {})
    if embedding.get("provider", "sentence-transformers") != "sentence-transformers":
        return None  # built through an endpoint: a local build of it is another provider (refused as a mismatch)
    return embedding.get("encoder", "torch")


def choose_encoder(
    root: Path, embedder: Any, encoder: str | None, device: str, on_cluster_gpus: bool = False
) -> tuple[Device | None, str]:
    """(device, encoder) of a build: a given `embedder` brings its own (no device); else `encoder` as given,
    or the one the index records, or the device's default. A GPU asked for but absent is refused (the driver
    of a GPU cluster needs none: `auto` for it); `torch-fp16` without a GPU is refused for a new index."""
    placed = None if embedder is not None else resolve_device("auto" if on_cluster_gpus else device)
    recorded = None if embedder is not None else recorded_encoder(root)
    if encoder is None and placed is not None:  # an index keeps the encoder it was built with
        encoder = recorded or ("torch-fp16" if on_cluster_gpus else default_encoder_for(placed))
    if embedder is None and encoder not in Embedder.ENCODERS:
        raise UsageError(f"invalid encoder {encoder!r}: choose one of {', '.join(Embedder.ENCODERS)}")
    if placed is not None:
        placed = place_encoder(str(encoder), placed)  # an ONNX index stays on the CPU under auto
        if encoder == "torch-fp16" and not placed.gpu and recorded != "torch-fp16" and not on_cluster_gpus:
            raise UsageError(
                f"encoder 'torch-fp16' runs on a GPU and there is none here ({placed}); "
                "use --encoder onnx-int8 or torch on the CPU"
            )
    return placed, embedder.encoder if embedder is not None else str(encoder)
