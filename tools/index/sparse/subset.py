"""The sparse-information subset of an index (COS-Mix, arXiv 2406.00638).

COS-Mix falls back to "sparse" chunks when similarity retrieval fails: chunks whose
information occurs only in them, which a similarity search ranks low because nothing
reinforces them. The criterion here is relative to the corpus: a chunk is sparse when
the cosine similarity to its nearest *other* chunk (exact self-search over the
normalised vectors; above `APPROXIMATE_ABOVE` rows the IVF search of `ann`, whose
similarity is a lower bound of the exact one) is below the `percentile`-th
percentile of that similarity over the whole corpus. So S is about `percentile` % of the chunks whatever the corpus or
the embedding model (default 10 %); R is the rest. An absolute cut-off would flag half
of a corpus of near-duplicates or none of a diverse one; a rare-term count flags
chunks whose information is merely phrased uniquely, not found nowhere else.

The subset is a pure function of the vectors, rebuilt with every index generation.
The fallback's score over S (`cosmix_scores`) uses both the cosine similarity to
the question and the chunk's cosine *distance* to its nearest neighbour.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.sparse import ann


class SparseSubset(BaseModel):
    rows: list[int]
    percentile: float
    cutoff: float  # nearest-neighbour similarity at the percentile: sparse when below


def similarities_to_all(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(len(rows), n) inner products of rows `rows` of `v` with every row, each row's own entry -inf."""
    s = v[rows] @ v.T
    s[np.arange(len(rows)), rows] = -np.inf
    return s


APPROXIMATE_ABOVE = 50_000  # rows: above this the nearest-neighbour pass is the IVF search of `ann`


def nearest_neighbours(vectors: np.ndarray, block: int = 1024, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(similarity, row) of each row's nearest other row (-inf and -1 below 2 rows): exact and blockwise up to
    `APPROXIMATE_ABOVE` rows (or always with `exact`), above it the approximate IVF search of
    `ragsieve.tools.index.sparse.ann` (O(N^1.5) instead of O(N^2); its similarity is a lower bound of the exact one)."""
    n = len(vectors)
    if not exact and n > APPROXIMATE_ABOVE:
        return ann.ivf_nearest_neighbours(vectors)  # through the module: a test counts its calls
    sim = np.full(n, -np.inf, dtype=np.float32)
    row = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return sim, row
    v = np.asarray(vectors, dtype=np.float32)
    for start in range(0, n, block):
        idx = np.arange(start, min(start + block, n))
        s = similarities_to_all(v, idx)
        row[idx] = s.argmax(axis=1)
        sim[idx] = s[np.arange(idx.size), row[idx]]
    return sim, row


def nearest_neighbour_similarity(vectors: np.ndarray, block: int = 1024) -> np.ndarray:
    """Cosine similarity of each row to its nearest other row (exact, blockwise inner product)."""
    n = vectors.shape[0]
    if n < 2:
        return np.full(n, -1.0, dtype=np.float32)
    return nearest_neighbours(vectors, block)[0]


def _check_percentile(percentile: float) -> None:
    if not 0.0 < percentile < 100.0:
        raise UsageError(f"sparse percentile must be in (0, 100), got {percentile}")


def sparse_subset(near: np.ndarray, percentile: float) -> SparseSubset:
    """Rows whose nearest-neighbour similarity `near` is below its `percentile`-th percentile."""
    _check_percentile(percentile)
    if near.size < 2:
        return SparseSubset(rows=[], percentile=percentile, cutoff=float("nan"))
    cutoff = float(np.percentile(near, percentile))
    return SparseSubset(rows=np.flatnonzero(near < cutoff).tolist(), percentile=percentile, cutoff=cutoff)


def find_sparse_rows(vectors: np.ndarray, percentile: float = 10.0) -> SparseSubset:
    """Rows whose nearest-neighbour similarity is below the corpus `percentile` (see the module docstring)."""
    _check_percentile(percentile)  # before the O(N^2) search
    return sparse_subset(nearest_neighbour_similarity(vectors), percentile)


def cosmix_scores(similarity: npt.ArrayLike, neighbour_similarity: npt.ArrayLike, distance_weight: float = 0.5) -> np.ndarray:
    """The fallback's score of a sparse chunk c for question q. OURS: COS-Mix combines similarity and
    distance but gives no formula; this one is our choice (benchmarks/fallback.py measures it against
    plain cosine and BM25 over the sparse subset):

        score(c) = cos(q, c) + w * (1 - max_{c' != c} cos(c, c'))

    the similarity to the question plus w times the chunk's cosine distance to its nearest
    neighbour: among chunks equally close to the question, the one whose information is
    found nowhere else ranks first."""
    if distance_weight < 0:
        raise UsageError(f"distance_weight must be >= 0, got {distance_weight}")
    sim = np.asarray(similarity, dtype=float)
    nn = np.asarray(neighbour_similarity, dtype=float)
    if sim.shape != nn.shape:
        raise UsageError(f"cosmix_scores: {sim.shape} similarities but {nn.shape} neighbour similarities")
    return sim + distance_weight * (1.0 - nn)
