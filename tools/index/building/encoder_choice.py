"""Which sentence-transformers encoder a build uses: the one an existing index records, else the default."""
from __future__ import annotations

import logging
from pathlib import Path

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
