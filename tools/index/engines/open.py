"""Open an index folder with the backend it was published to: `milvus` where `<index>/milvus.json` says so,
else `local`. The one place that knows both engines; the contract is `ragsieve.tools.index.backend`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragsieve.tools.index.backend import IndexBackend
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.milvus.index import MilvusIndex


def open_index(index_dir: str | Path, embedder: Any = None, device: str = "auto") -> IndexBackend:
    """The index in `index_dir` with the backend it was published to (`<index>/milvus.json`), else local;
    a local model embeds its queries on `device` (`ragsieve.tools.index.embedders.device`)."""
    if (Path(index_dir) / "milvus.json").is_file():
        index = MilvusIndex.open(index_dir, embedder=embedder)
        index.device = device
        return index
    return HybridIndex.open(index_dir, embedder=embedder, device=device)


@contextmanager
def opened(index_dir: str | Path, embedder: Any = None) -> Iterator[IndexBackend]:
    """`open_index(index_dir)` for one `with` block, closed after it."""
    index = open_index(index_dir, embedder=embedder)
    try:
        yield index
    finally:
        index.close()
