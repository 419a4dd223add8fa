"""Each row's source and kind beside a Milvus-backed index (`milvus-sparse/meta-<gen>.npz`), written at publish.

A metadata or access filter resolves to the rows it admits (`MilvusIndex.admitted`). Asking Milvus for them
means reading every matching row back through `query`, which milvus-lite serves at a few thousand rows a
second: at 100k chunks, listing the sources took ~20 s and the rows of a filter admitting half of them ~16 s,
paid again whenever the access labels change. The publish already holds each row's source and kind (the
local generation's chunk store), so it writes them here once, and the filter is resolved locally: one check
per distinct (source, kind), then a gather over the rows (milliseconds at 1M rows). A pointer published
before this file falls back to reading the collection.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ragsieve.tools.index.milvus.pointer import SPARSE_DIR


def write_row_metadata(root: Path, gen: str, rows: Iterable[tuple[int, str, str]]) -> str:
    """Write (row, source, kind) of every row of generation `gen` (rows 0..n-1, in order) atomically; return
    the file's name relative to `root`, as the pointer records it."""
    listed = list(rows)
    if [r for r, _, _ in listed] != list(range(len(listed))):
        raise ValueError("row metadata must list rows 0..n-1 in order")
    sources, source_ids = np.unique(np.asarray([s for _, s, _ in listed], dtype=str), return_inverse=True)
    kinds, kind_ids = np.unique(np.asarray([k for _, _, k in listed], dtype=str), return_inverse=True)
    folder = root / SPARSE_DIR
    folder.mkdir(exist_ok=True)
    name = f"meta-{gen}.npz"
    tmp = folder / f".{name}.tmp"
    with open(tmp, "wb") as fh:
        np.savez(fh, sources=sources, kinds=kinds, source_of_row=source_ids.astype(np.int32),
                 kind_of_row=kind_ids.astype(np.int32))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / name)
    return f"{SPARSE_DIR}/{name}"


class RowMetadata:
    """The source and kind of every row of one published generation (see the module doc)."""

    def __init__(self, sources: list[str], kinds: list[str], source_of_row: np.ndarray,
                 kind_of_row: np.ndarray) -> None:
        self.sources, self.kinds = sources, kinds
        self.source_of_row = np.asarray(source_of_row, dtype=np.int64)
        self.kind_of_row = np.asarray(kind_of_row, dtype=np.int64)

    @classmethod
    def load(cls, path: Path, rows: int) -> "RowMetadata":
        """Read a file `write_row_metadata` wrote; ValueError when it does not describe `rows` rows."""
        with np.load(path, allow_pickle=False) as data:
            out = cls([str(s) for s in data["sources"]], [str(k) for k in data["kinds"]],
                      data["source_of_row"], data["kind_of_row"])
        if len(out.source_of_row) != rows or len(out.kind_of_row) != rows:
            raise ValueError(f"{path} lists {len(out.source_of_row)} rows, the pointer {rows}")
        return out

    def rows_where(self, admits: Callable[[str, str], bool]) -> np.ndarray:
        """The rows (sorted) whose (source, kind) `admits` accepts, asked once per distinct pair."""
        pair = self.source_of_row * max(1, len(self.kinds)) + self.kind_of_row
        distinct, inverse = np.unique(pair, return_inverse=True)
        width = max(1, len(self.kinds))
        ok = np.fromiter((admits(self.sources[p // width], self.kinds[p % width]) for p in distinct.tolist()),
                         dtype=bool, count=len(distinct))
        return np.flatnonzero(ok[inverse])
