"""What a Milvus publish reads of the live local generation, opened without loading its search indexes.

An incremental publish reads the changed rows only: their chunks (SQLite), vectors
(`vectors.npy`, memory-mapped) and the generation's sparse subset. Opening the
whole `HybridIndex` also loads the BM25 index and the FAISS graph, O(corpus) work
(seconds at 1M chunks) a one-document publish does not need. A generation whose
layout this view does not know is opened as a `HybridIndex`.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import IndexMissingError


class LocalView:
    def __init__(self, gen: Path) -> None:
        from ragsieve.tools.index.hybrid import read_manifest
        from ragsieve.tools.index.store import ChunkStore

        self.path = gen
        self.manifest = read_manifest(gen)
        self.vectors = np.load(gen / "vectors.npy", mmap_mode="r")
        self.sparse_rows = [int(r) for r in json.loads((gen / "sparse.json").read_text(encoding="utf-8"))["rows"]]
        self.store = ChunkStore(gen / "chunks.sqlite", read_only=True)
        if self.store.count() != len(self.vectors) or self.vectors.ndim != 2:
            self.store.close()
            raise IndexMissingError(f"index generation {gen} is inconsistent: {self.store.count()} chunks, "
                                    f"{len(self.vectors)} vectors; rebuild with --rebuild")

    def __len__(self) -> int:
        return self.store.count()

    def close(self) -> None:
        self.store.close()


@contextmanager
def open_live(root: Path):
    """The live local generation of `root` as a `LocalView` (or a `HybridIndex` for another layout)."""
    from ragsieve.tools.index.hybrid import HybridIndex, current_generation

    gen = current_generation(root)
    if gen is not None and all((gen / f).is_file() for f in ("manifest.json", "vectors.npy", "sparse.json",
                                                              "chunks.sqlite")):
        view = LocalView(gen)
        try:
            yield view
        finally:
            view.close()
        return
    with HybridIndex.open(root) as local:
        yield local
