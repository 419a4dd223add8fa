"""Dense retrieval: a FAISS inner-product index over the stored vectors, and the vector arithmetic around it.

Vectors are L2-normalised, so inner product = cosine similarity (the local
model that embeds them is `ragsieve.tools.index.embedders.local_embedder`). The raw
vectors are kept next to the FAISS file (`vectors.npy`, row order = chunk
rows) so that incremental re-indexing reuses them and subset search is exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.search import npy
from ragsieve.tools.index.search.admitted import Admitted
from ragsieve.tools.modes import FaissKind, parse_enum

FAISS_FILE = "dense.faiss"
VECTORS_FILE = "vectors.npy"


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their Euclidean norm (zero rows stay zero), as float32."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms == 0, 1.0, norms)


def corpus_similarities(vectors: Any, query: np.ndarray, block: int = 65536) -> np.ndarray:
    """Cosine of `query` with every row of `vectors` (unit rows), float64, `block` rows at a time:
    a memory-mapped float32 matrix of millions of rows is never copied whole to float64."""
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    n = len(vectors)
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, block):
        out[start : start + block] = np.asarray(vectors[start : start + block], dtype=np.float64) @ q
    return out


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise UsageError("dense retrieval needs FAISS: pip install faiss-cpu") from exc
    return faiss


class DenseIndex:
    """FAISS inner-product index over normalised vectors (row i = chunk row i)."""

    def __init__(
        self, kind: str | FaissKind = FaissKind.FLAT, hnsw_m: int = 32, ef_search: int = 128, ef_construction: int = 200
    ) -> None:
        self.kind = parse_enum(FaissKind, kind, "faiss index")
        for name, value in (("hnsw_m", hnsw_m), ("ef_search", ef_search), ("ef_construction", ef_construction)):
            if value < 1:
                raise UsageError(f"{name} must be >= 1, got {value}")
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction
        self.vectors: np.ndarray = np.zeros((0, 0), dtype=np.float32)
        self._index = None

    @property
    def params(self) -> dict:
        p: dict = {"kind": self.kind.value}
        if self.kind is FaissKind.HNSW:
            p.update(hnsw_m=self.hnsw_m, ef_search=self.ef_search, ef_construction=self.ef_construction)
        return p

    def build(self, vectors: np.ndarray) -> "DenseIndex":
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] == 0:
            raise UsageError(f"dense index needs a non-empty 2-D array, got shape {v.shape}")
        faiss = _faiss()
        if self.kind is FaissKind.FLAT:
            index = faiss.IndexFlatIP(v.shape[1])
        else:
            index = faiss.IndexHNSWFlat(v.shape[1], self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
        index.add(v)
        self._set(index, v)
        return self

    def _set(self, index: Any, vectors: np.ndarray) -> None:
        if self.kind is FaissKind.HNSW:
            index.hnsw.efSearch = self.ef_search
        self._index = index
        self.vectors = vectors

    def save(self, directory: str | Path) -> None:
        """Write `dense.faiss` and `vectors.npy` into `directory`."""
        if self._index is None:
            raise UsageError("dense index: nothing to save, call build() first")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        _faiss().write_index(self._index, str(d / FAISS_FILE))
        np.save(d / VECTORS_FILE, np.asarray(self.vectors, dtype=np.float32))

    @classmethod
    def load(cls, directory: str | Path, ef_search: int | None = None, mmap: bool = True) -> "DenseIndex":
        d = Path(directory)
        for name in (FAISS_FILE, VECTORS_FILE):
            if not (d / name).is_file():
                raise IndexMissingError(f"dense index incomplete in {d}: no {name}")
        faiss = _faiss()
        index = faiss.read_index(str(d / FAISS_FILE))
        kind = FaissKind.HNSW if isinstance(index, faiss.IndexHNSW) else FaissKind.FLAT
        out = cls(kind)
        if kind is FaissKind.HNSW:
            out.hnsw_m = index.hnsw.nb_neighbors(1)
            out.ef_construction = index.hnsw.efConstruction
            out.ef_search = ef_search or index.hnsw.efSearch
        out._set(index, npy.load(d / VECTORS_FILE, mmap_mode="r" if mmap else None))
        return out

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Top `k` (row, inner product) best first."""
        if self._index is None:
            raise UsageError("dense index is empty: build() or load() it first")
        if k < 1:
            raise UsageError(f"dense search k must be >= 1, got {k}")
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        scores, ids = self._index.search(q, min(k, len(self)))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]

    def search_rows(self, vector: np.ndarray, rows: list[int] | np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Exact top `k` (row, inner product) among `rows` only (numpy), best first; ties by lower row."""
        if k < 1:
            raise UsageError(f"dense search k must be >= 1, got {k}")
        if len(rows) == 0:
            return []
        cand = np.asarray(rows, dtype=np.int64)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if 4 * len(cand) >= len(self.vectors):  # many rows (a broad access filter): one pass, no gather
            sims = (np.asarray(self.vectors) @ q)[cand]
        else:
            sims = self.vectors[cand] @ q
        if len(cand) > 4 * k:  # only the rows at or above the k-th score are sorted (exact, ties included)
            kth = np.partition(sims, len(sims) - k)[len(sims) - k]
            keep = np.flatnonzero(sims >= kth)
            cand, sims = cand[keep], sims[keep]
        order = np.lexsort((cand, -sims))[:k]
        return [(int(cand[i]), float(sims[i])) for i in order]

    def search_admitted(self, vector: np.ndarray, admitted: Admitted, k: int = 10) -> list[tuple[int, float]]:
        """Top `k` (row, inner product) among the `admitted` rows, best first, the filter applied inside the
        search. A flat index ranks them exactly (`scan_admitted`). An HNSW index chooses, by a cost model, between
        the same exact scan and a walk of its graph keeping only admitted rows (FAISS `IDSelectorBitmap`): the
        walk's candidate list is `filtered_ef` (WALK_WIDTH times the unfiltered one over the admitted share),
        and a walk step computes distances to up to 2M neighbours (HNSW level 0) where the scan computes one per
        admitted row, so the graph is walked only when more than 2M x `filtered_ef` rows are admitted
        (`walk_pays`). Measured at 100k rows (384-d, M 32, one thread): a step ~4 us, a scanned row ~70-85 ns.

        Why both: a walk with the unfiltered walk's budget per admitted row (ef 128/share) lost hybrid recall
        that the unfiltered walk keeps (measured at 100k rows over 400 queries: ~0.9975 at 50 % admitted,
        ~0.995 at 25 %); twice that budget keeps the unfiltered walk's own recall at about twice its time, while
        a full 1.0 at 50 % takes a still wider walk (ef 768: ~2.4x) or the exact scan (~2.9x the unfiltered
        search; `benchmarks/results/access-hnsw-400q*.json`). The exact scan is never wrong and, skipping the
        other rows, costs in proportion to the admitted rows, so below the crossover it is both exact and
        faster than the walk (at 100k rows, M 32: below ~40 % admitted). See docs/access.md."""
        if k < 1:
            raise UsageError(f"dense search k must be >= 1, got {k}")
        if not len(admitted):
            return []
        faiss = _faiss()
        index = self._index
        if isinstance(index, faiss.IndexHNSW) and admitted.fraction < 1.0:
            ef = filtered_ef(self.ef_search, k, admitted.fraction)
            if walk_pays(len(admitted), ef, self.hnsw_m):
                params = faiss.SearchParametersHNSW(sel=admitted.selector(), efSearch=ef)
                return self._faiss_top(index, vector, min(k, len(admitted)), params)
        elif isinstance(index, faiss.IndexHNSW):  # every row admitted: the unfiltered walk
            return self.search(vector, k)
        return self.scan_admitted(vector, admitted, k)

    def scan_admitted(self, vector: np.ndarray, admitted: Admitted, k: int = 10) -> list[tuple[int, float]]:
        """Exact top `k` among the `admitted` rows: a FAISS scan of the stored vectors (the flat index, or an
        HNSW index's own storage) skipping the rows outside the bitmap when at least BITMAP_SCAN_SHARE of the
        rows are admitted, else the admitted rows' vectors gathered and ranked (`search_rows`; measured at 100k
        rows: the bitmap scan 0.36 ms vs 0.78 ms at 5 % admitted, 0.85 vs 2.1 ms at 10 %, 2.8 vs 7.1 ms at 30 %;
        gathering wins below ~3 %)."""
        faiss = _faiss()
        index = self._index
        if isinstance(index, faiss.IndexHNSW):
            index = faiss.downcast_index(index.storage)
        if not isinstance(index, faiss.IndexFlat) or len(admitted) < BITMAP_SCAN_SHARE * len(self):
            return self.search_rows(vector, admitted.rows, k)
        return self._faiss_top(index, vector, min(k, len(admitted)), faiss.SearchParameters(sel=admitted.selector()))

    @staticmethod
    def _faiss_top(index: Any, vector: np.ndarray, k: int, params: Any) -> list[tuple[int, float]]:
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        scores, ids = index.search(q, k, params=params)
        found = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        return sorted(found, key=lambda p: (-p[1], p[0]))


WALK_WIDTH = 2  # a filtered walk's candidate list: this many times the unfiltered one's per admitted row
MAX_FILTERED_EF = 4096
BITMAP_SCAN_SHARE = 1 / 32  # from this admitted share an exact scan skips rows by bitmap instead of gathering


def filtered_ef(ef_search: int, k: int, fraction: float) -> int:
    """The HNSW candidate list of a walk that keeps only a `fraction` of the rows: the index's own `ef_search`
    (at least k) times WALK_WIDTH divided by the fraction (the candidate list holds admitted and other rows
    alike), at most MAX_FILTERED_EF; a walk over every row keeps the index's own."""
    base = max(ef_search, k)
    if fraction >= 1.0:
        return base
    return int(min(MAX_FILTERED_EF, max(base, np.ceil(WALK_WIDTH * base / max(fraction, 1e-6)))))


def walk_pays(admitted: int, ef: int, hnsw_m: int) -> bool:
    """Whether a filtered walk with candidate list `ef` costs less than an exact scan of `admitted` rows: a walk
    expands about `ef` nodes, each computing distances to up to 2M neighbours (level 0 of an HNSW graph)."""
    return admitted > 2 * hnsw_m * ef
