"""The rows a filter admits, resolved once and kept in the forms the local searches read.

A metadata or access filter (`ragsieve.tools.index.search.where.Where`) admits a set of rows of an index. Resolving it
(labels checked source by source) is the slow part; the local backend does it once per filter and labels version
(`HybridIndex.admitted`) and keeps the result here, so that a query never checks a label nor converts a list:

* `rows`: the admitted rows, sorted, as a read-only int64 array (BM25 and exact dense scores gather them);
* `mask`: a boolean array over all rows (membership, and BM25 restricted without a gather when the set is broad);
* `selector()`: a FAISS `IDSelectorBitmap` over the same rows, for a filtered HNSW walk (`DenseIndex.search_admitted`);
* `expr` (Milvus): the filter's own boolean expression (`source in [...]`), which Milvus evaluates faster in a
  filtered HNSW search than the list of its rows (`row in [...]`, ten times as many terms at 10 chunks a document).

The filter stays inside retrieval: a search restricted to an `Admitted` returns k admitted rows, never k rows
of which some are then dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np


class Admitted:
    """A sorted set of rows of an index of `n` rows (see the module doc)."""

    def __init__(self, rows: Iterable[int] | np.ndarray, n: int, expr: str | None = None) -> None:
        arr = np.unique(np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64))
        if arr.size and (arr[0] < 0 or arr[-1] >= n):
            raise ValueError(f"admitted rows outside the index (0..{n - 1})")
        arr.flags.writeable = False
        self.rows, self.n = arr, int(n)
        self.expr = expr  # on Milvus: the filter as the boolean expression that admitted these rows
        self._lock = threading.Lock()
        self._mask: np.ndarray | None = None
        self._bits: np.ndarray | None = None
        self._selector: object | None = None

    def __len__(self) -> int:
        return int(self.rows.size)

    @property
    def fraction(self) -> float:
        """The admitted share of the index's rows (0 for an empty index)."""
        return len(self) / self.n if self.n else 0.0

    @property
    def mask(self) -> np.ndarray:
        """Boolean (n,): True at the admitted rows (read-only; made on first use)."""
        with self._lock:
            if self._mask is None:
                mask = np.zeros(self.n, dtype=bool)
                mask[self.rows] = True
                mask.flags.writeable = False
                self._mask = mask
            return self._mask

    def __contains__(self, row: object) -> bool:
        return isinstance(row, (int, np.integer)) and 0 <= int(row) < self.n and bool(self.mask[int(row)])

    def selector(self) -> object:
        """A FAISS `IDSelectorBitmap` admitting these rows (made on first use; its bitmap lives as long as this)."""
        import faiss

        mask = self.mask
        with self._lock:
            if self._selector is None:
                self._bits = np.packbits(mask, bitorder="little")  # bit i of byte i // 8 is row i, as FAISS reads it
                self._selector = faiss.IDSelectorBitmap(self.n, faiss.swig_ptr(self._bits))
            return self._selector

    def tolist(self) -> list[int]:
        return self.rows.tolist()


class AdmittedCache:
    """Resolved filters by key (the filter and the access labels version), the oldest forgotten past `limit`;
    guarded by its own lock, as both backends answer questions on several threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: dict[str, Admitted] = {}

    def get(self, key: str) -> Admitted | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, admitted: Admitted) -> Admitted:
        with self._lock:
            self._entries[key] = admitted
            while len(self._entries) > self.limit:
                self._entries.pop(next(iter(self._entries)))
        return admitted
