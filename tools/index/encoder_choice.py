"""Which sentence-transformers encoder a build uses: the one an existing index records, else the default."""
from __future__ import annotations

import logging
from pathlib import Path

from ragsieve.tools.index.generations import live_generation
from ragsieve.tools.index.hybrid import MANIFEST, read_manifest

log = logging.getLogger(__name__)


def default_encoder() -> str:
    """The encoder of a new index: `onnx-int8` (int8 weights on ONNX Runtime: within 0.005 nDCG@10 of `torch` on
    SciFact, SQuAD 2.0 and HotpotQA, 2.2-2.5x the chunks per CPU-second; issue 28, `scale_encoder_sets.json`) when ONNX
    Runtime and onnx are installed, else `torch`. An existing index keeps the encoder its manifest records."""
    from importlib.util import find_spec

    if find_spec("onnxruntime") is not None and find_spec("onnx") is not None:
        return "onnx-int8"
    log.info("encoder torch: install ragsieve[fast] for the faster onnx-int8 encoder")
    return "torch"


def recorded_encoder(root: Path) -> str | None:
    """The encoder the live generation of `root` was embedded with (None: no index yet)."""
    gen = live_generation(root)
    if gen is None or not (gen / MANIFEST).is_file():
        return None
    embedding = read_manifest(gen).get("embedding", {})
    if embedding.get("provider", "sentence-transformers") != "sentence-transformers":
        return None  # built through an endpoint: a local build of it is another provider (refused as a mismatch)
    return embedding.get("encoder", "torch")
