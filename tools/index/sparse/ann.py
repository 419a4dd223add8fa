"""Approximate nearest other row of every row: an inverted-file (IVF) partition in numpy, for large indexes.

The sparse subset (`ragsieve.tools.index.sparse.subset`, COS-Mix arXiv 2406.00638) needs each chunk's similarity
to its nearest other chunk. The exact self-search is O(N^2 d): at 1M chunks of 384 dimensions about 4e14
multiply-adds, hours on two cores. Above a size threshold the index uses the classic IVF search instead
(Jegou, Douze & Schmid, "Product quantization for nearest neighbor search", TPAMI 2011, section IV-A; FAISS's
IndexIVFFlat computes the same): k-means on a sample gives `nlist` centroids; every row is put in the cell of
its nearest centroid and probes the `nprobe` cells whose centroids are nearest to it; its neighbour is the
most similar other row among the members of those cells, compared exactly. Cost about
N * nprobe * (N / nlist) * d, with nlist ~ sqrt(N): O(N^1.5 d) instead of O(N^2 d). The rows with the lowest
similarities (the sparse candidates, the rows a partition misses most) are then searched again in 4x the cells.

What the approximation changes: a row whose true nearest neighbour lies outside its probed cells gets the
best row inside them, so its similarity is a lower bound of the exact one (never higher). Such a row can
only look sparser than it is: the percentile cut-off moves down slightly and the sparse subset can take a
few rows whose neighbour was missed in place of rows just above the cut. `benchmarks/sparse_ann.py` measures
the share of the exact subset that the approximate one keeps. The search is deterministic (seeded k-means).
"""

from __future__ import annotations

import numpy as np


def default_nlist(n: int) -> int:
    """Cells for n rows: about sqrt(n) (cells of ~sqrt(n) rows), at least 16."""
    return max(16, int(np.sqrt(n)))


def kmeans(vectors: np.ndarray, k: int, iterations: int = 10, sample: int | None = None, seed: int = 0) -> np.ndarray:
    """(k, d) unit centroids of spherical k-means (inner product) on a seeded sample of `vectors`."""
    rng = np.random.default_rng(seed)
    n = len(vectors)
    size = min(n, sample if sample is not None else 64 * k)
    pick = np.sort(rng.choice(n, size=size, replace=False)) if size < n else np.arange(n)
    x = np.asarray(vectors[pick], dtype=np.float32)
    centroids: np.ndarray = x[rng.choice(len(x), size=k, replace=False)].copy()
    for _ in range(iterations):
        assign = top_cells(x, centroids, 1)[:, 0]
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, x)
        empty = np.bincount(assign, minlength=k) == 0
        sums[empty] = x[rng.choice(len(x), size=int(empty.sum()), replace=False)]  # reseed empty cells
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = sums / np.where(norms > 0, norms, 1.0)
    return centroids.astype(np.float32)


def top_cells(x: np.ndarray, centroids: np.ndarray, p: int, block: int = 16384) -> np.ndarray:
    """(len(x), p) indices of the p centroids with the largest inner product with each row, best first."""
    out = np.empty((len(x), p), dtype=np.int64)
    for start in range(0, len(x), block):
        s = np.asarray(x[start : start + block], dtype=np.float32) @ centroids.T
        if p == 1:
            out[start : start + block, 0] = s.argmax(axis=1)
            continue
        part = np.argpartition(-s, p - 1, axis=1)[:, :p]
        order = np.argsort(-np.take_along_axis(s, part, axis=1), axis=1)
        out[start : start + block] = np.take_along_axis(part, order, axis=1)
    return out


NPROBE = 8  # cells each row searches
REFINE_SHARE = 0.2  # the lowest share of similarities searched again ...
REFINE_PROBES = 32  # ... in this many cells


def ivf_nearest_neighbours(
    vectors: np.ndarray,
    nlist: int | None = None,
    nprobe: int | None = None,
    seed: int = 0,
    refine_share: float | None = None,
    refine_probes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(similarity, row) of `ivf_partition`, without the cells."""
    return ivf_partition(vectors, nlist, nprobe, seed, refine_share, refine_probes)[:2]


def ivf_partition(
    vectors: np.ndarray,
    nlist: int | None = None,
    nprobe: int | None = None,
    seed: int = 0,
    refine_share: float | None = None,
    refine_probes: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(similarity, row, centroids, cell): centroids (nlist, d) and each row's cell are what an index keeps so
    that a later change searches only the cells it touches (`ragsieve.tools.index.sparse.cells`). (similarity, row) of each row's nearest other row among the members of its `nprobe` nearest cells
    (see the module docstring); -inf and -1 for a row that finds no other row there. The rows whose similarity
    is in the lowest `refine_share` (the candidates for the sparse subset, and the rows a partition misses most:
    their neighbours are far, often across a cell border) are searched again in their `refine_probes` nearest
    cells."""
    nprobe = NPROBE if nprobe is None else nprobe
    refine_share = REFINE_SHARE if refine_share is None else refine_share
    refine_probes = REFINE_PROBES if refine_probes is None else refine_probes
    v = np.asarray(vectors, dtype=np.float32)
    n = len(v)
    sim = np.full(n, -np.inf, dtype=np.float32)
    row = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return sim, row, np.zeros((0, v.shape[1] if v.ndim == 2 else 0), dtype=np.float32), np.zeros(n, np.int32)
    nlist = min(n, nlist or default_nlist(n))
    centroids = kmeans(v, nlist, seed=seed)
    probes = top_cells(v, centroids, max(1, min(nprobe, nlist)))  # probes[:, 0] is the row's own cell
    members = _groups(probes[:, 0], nlist)
    _search(v, np.arange(n), probes, members, sim, row)
    wide = min(refine_probes, nlist)
    if refine_share > 0 and wide > probes.shape[1]:
        low = np.flatnonzero(sim <= np.quantile(sim, refine_share))
        _search(v, low, top_cells(v[low], centroids, wide), members, sim, row)
    return sim, row, centroids, probes[:, 0].astype(np.int32)


def _search(
    v: np.ndarray, queries: np.ndarray, probes: np.ndarray, members: list[np.ndarray], sim: np.ndarray, row: np.ndarray
) -> None:
    """Update sim/row of rows `queries` (probes[i]: the cells of queries[i]) with their best member of those cells."""
    probers = _groups(probes.ravel(), len(members), repeat=probes.shape[1])
    position = np.full(len(v), -1, dtype=np.int64)
    for c, m in enumerate(members):
        q = queries[probers[c]]
        if m.size == 0 or q.size == 0:
            continue
        position[m] = np.arange(m.size)
        for start in range(0, q.size, 4096):
            qs = q[start : start + 4096]
            s = v[qs] @ v[m].T
            own = position[qs]
            mine = np.flatnonzero(own >= 0)
            s[mine, own[mine]] = -np.inf  # a row is not its own neighbour
            best = s.argmax(axis=1)
            best_sim = s[np.arange(qs.size), best]
            better = best_sim > sim[qs]
            sim[qs[better]], row[qs[better]] = best_sim[better], m[best[better]]
        position[m] = -1


def _groups(labels: np.ndarray, k: int, repeat: int = 1) -> list[np.ndarray]:
    """For each label 0..k-1 the rows carrying it (`labels` flattened from (n, repeat): row = index // repeat)."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(k + 1))
    rows = order // repeat
    return [rows[bounds[c] : bounds[c + 1]] for c in range(k)]
