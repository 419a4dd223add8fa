"""What a Milvus publish reads of the live local generation, opened without loading its search indexes.

An incremental publish reads the changed rows only: their chunks (SQLite), vectors
(`vectors.npy` memory-mapped, or an incremental generation's segments composed
copy-on-write, `ragsieve.tools.index.local.segments`) and the generation's sparse subset. Opening the
whole `HybridIndex` also loads the BM25 index and the FAISS graph, O(corpus) work
(seconds at 1M chunks) a one-document publish does not need. A generation whose
layout this view does not know is opened as a `HybridIndex`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.generations import layout_of as _layout
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.local.segments import SegmentView
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.index.search import npy

REQUIRED = ("manifest.json", "vectors.npy", "sparse.json", "chunks.sqlite")  # a whole-generation layout
SEGMENTED = ("manifest.json", "segments", "sparse.json")  # the incremental layout (chunks in a shared store)


def readable(gen: Path) -> bool:
    """Whether `LocalView` can open generation folder `gen` (either layout)."""
    wanted = SEGMENTED if _layout(gen) == "segments" else REQUIRED
    return all((gen / f).exists() for f in wanted)


class LocalView:
    def __init__(self, gen: Path) -> None:
        self.path = gen
        self.manifest = read_manifest(gen)
        sparse = json.loads((gen / "sparse.json").read_text(encoding="utf-8"))
        self.store = ChunkStore(gen / "chunks.sqlite", read_only=True)  # an incremental one: its shared store
        try:
            if self.manifest.get("layout") == "segments":
                view = SegmentView(gen, self.manifest["segments"], int(self.manifest["counts"]["chunks"]))
                self.vectors = view.vectors
                sim = view.nearest()[0]
                self.sparse_rows = [] if view.n < 2 else np.flatnonzero(sim < float(sparse["cutoff"])).tolist()
            else:
                self.vectors = npy.load(gen / "vectors.npy", mmap_mode="r")
                self.sparse_rows = [int(r) for r in sparse["rows"]]
        except BaseException:
            self.store.close()
            raise
        if self.store.count() != len(self.vectors) or self.vectors.ndim != 2:
            self.store.close()
            raise IndexMissingError(
                f"index generation {gen} is inconsistent: {self.store.count()} chunks, "
                f"{len(self.vectors)} vectors; rebuild with --rebuild"
            )

    def __len__(self) -> int:
        return self.store.count()

    def close(self) -> None:
        self.store.close()


Local = LocalView | HybridIndex  # a local generation as the publisher reads it


@contextmanager
def open_live(root: Path) -> Iterator[Local]:
    """The live local generation of `root` as a `LocalView` (or a `HybridIndex` for another layout)."""
    gen = current_generation(root)
    if gen is not None and readable(gen):
        view = LocalView(gen)
        try:
            yield view
        finally:
            view.close()
        return
    with HybridIndex.open(root) as local:
        yield local
