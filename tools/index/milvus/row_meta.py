"""Each row's source and kind beside a Milvus-backed index (`milvus-sparse/meta-<gen>.npz`), written at publish.

A metadata or access filter resolves to the rows it admits (`MilvusIndex.admitted`). Asking Milvus for them
means reading every matching row back through `query`, which milvus-lite serves at a few thousand rows a
second: at 100k chunks, listing the sources took ~20 s and the rows of a filter admitting half of them ~16 s,
paid again whenever the access labels change. The publish already holds each row's source and kind (the
local generation's chunk store), so it writes them here once, and the filter is resolved locally: one check
per distinct (source, kind), then a gather over the rows (`ragsieve.tools.index.row_meta.RowMetadata`, which
the local index uses too). A pointer published before this file falls back to reading the collection.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ragsieve.tools.index.milvus.pointer import SPARSE_DIR
from ragsieve.tools.index.row_meta import RowMetadata


def write_row_metadata(root: Path, gen: str, rows: Iterable[tuple[int, str, str]]) -> str:
    """Write (row, source, kind) of every row of generation `gen` (rows 0..n-1, in order) atomically; return
    the file's name relative to `root`, as the pointer records it."""
    meta = RowMetadata.from_rows(rows)
    if not np.array_equal(meta.rows, np.arange(len(meta.rows))):
        raise ValueError("row metadata must list rows 0..n-1 in order")
    folder = root / SPARSE_DIR
    folder.mkdir(exist_ok=True)
    name = f"meta-{gen}.npz"
    tmp = folder / f".{name}.tmp"
    with open(tmp, "wb") as fh:
        np.savez(
            fh,
            sources=np.asarray(meta.sources, dtype=str),
            kinds=np.asarray(meta.kinds, dtype=str),
            source_of_row=meta.source_of_row.astype(np.int32),
            kind_of_row=meta.kind_of_row.astype(np.int32),
        )
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / name)
    return f"{SPARSE_DIR}/{name}"
