"""Nearest-neighbour entries kept up to date inside IVF cells stored with the index: a change costs O(k) searches.

A full build above `sparse.APPROXIMATE_ABOVE` rows finds each row's nearest other row with the IVF search of
`ragsieve.tools.index.sparse.ann` (Jegou, Douze & Schmid, TPAMI 2011, section IV-A) and keeps its centroids and each
row's cell in the base segment (`centroids.npy`, `cell.npy`; delta segments carry the cell of the rows they
set). A change of k chunks then compares only inside cells, never with all N vectors:

* an added chunk is put in the cell of its nearest centroid and searches the members of its `ann.NPROBE`
  nearest cells (its own first): its best is its entry; a member of those cells for which the new chunk is
  closer than its recorded neighbour takes it;
* a kept chunk whose recorded neighbour was removed searches its `ann.NPROBE` nearest cells again;
* either kind of search that lands in the lowest `ann.REFINE_SHARE` of the similarities (the sparse candidates)
  is repeated in its `ann.REFINE_PROBES` nearest cells, as the full build refines them.

What this changes, against a full rebuild: the centroids are those of the build that wrote the base (a new
base written by compaction keeps them), and an old row takes a new chunk as its neighbour only when the new
chunk lies in one of the cells the new chunk probes; a row can therefore keep a neighbour that a full search
would beat, so every entry stays a lower bound of the exact similarity, as in the full IVF build. With
`NPROBE` >= the number of cells the search is exhaustive and the entries equal the exact ones
(`tests/core/test_ivf_cells.py`). Below `APPROXIMATE_ABOVE` rows updates stay exact against all rows
(`ragsieve.tools.index.sparse.nearest`); an index written before cells were stored gets them once, at its first
change above that size (`cells_for`: k-means and one assignment pass, then a compacted base).
"""

from __future__ import annotations

import numpy as np

from ragsieve.tools.index.sparse import ann
from ragsieve.tools.index.sparse.nearest import relocate


def cells_for(vectors: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(centroids, cell of every row) for an index that has none yet: seeded k-means on a sample, one pass."""
    v = np.asarray(vectors, dtype=np.float32)
    centroids = ann.kmeans(v, min(len(v), ann.default_nlist(len(v))), seed=seed)
    return centroids, ann.top_cells(v, centroids, 1)[:, 0].astype(np.int32)


def carry_cells(
    old_cell: np.ndarray,
    n: int,
    n_base: int,
    moved: dict[int, int],
    new_rows: list[int],
    vectors: np.ndarray,
    centroids: np.ndarray,
) -> np.ndarray:
    """The cell of every row of the new generation: kept rows keep theirs, moved rows take theirs along,
    added rows go to their nearest centroid."""
    cell = np.full(n, -1, dtype=np.int32)
    stay = min(n, n_base)
    cell[:stay] = np.asarray(old_cell)[:stay]
    if moved:
        old, new = zip(*sorted(moved.items()))
        cell[list(new)] = np.asarray(old_cell)[list(old)]
    if new_rows:
        cell[new_rows] = ann.top_cells(np.asarray(vectors[new_rows], dtype=np.float32), centroids, 1)[:, 0]
    return cell


def nearest_update_cells(
    vectors: np.ndarray,
    old_sim: np.ndarray,
    old_row: np.ndarray,
    n_base: int,
    freed: list[int],
    moved: dict[int, int],
    new_rows: list[int],
    centroids: np.ndarray,
    cell: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`nearest.nearest_update`'s result computed inside the cells (see the module docstring); `cell`: the new
    generation's cells (`carry_cells`). Returns (sim, row, touched)."""
    n = len(vectors)
    sim, row, touched = relocate(old_sim, old_row, n, n_base, freed, moved)
    added = np.asarray(sorted(new_rows), dtype=np.int64)
    redo = np.setdiff1d(np.flatnonzero(row < 0), added)
    sim[redo] = -np.inf  # their recorded neighbour is gone: searched afresh
    queries = np.concatenate([added, redo])
    if n >= 2 and queries.size:
        v = vectors
        nlist = len(centroids)
        probes = ann.top_cells(np.asarray(v[queries], dtype=np.float32), centroids, max(1, min(ann.NPROBE, nlist)))
        touched.update(_search(v, queries, probes, cell, sim, row, set(added.tolist())))
        low = _lowest(sim, ann.REFINE_SHARE)
        again = queries[sim[queries] <= low]
        wide = min(ann.REFINE_PROBES, nlist)
        if again.size and wide > probes.shape[1]:
            wider = ann.top_cells(np.asarray(v[again], dtype=np.float32), centroids, wide)
            _search(v, again, wider, cell, sim, row, set())
    if n < 2:
        sim[:], row[:] = -np.inf, -1
    touched.update(added.tolist())
    touched.update(redo.tolist())
    return sim, row, np.asarray(sorted(r for r in touched if r < n), dtype=np.int64)


def _lowest(sim: np.ndarray, share: float) -> float:
    finite = sim[np.isfinite(sim)]
    return float(np.quantile(finite, share)) if finite.size else -np.inf


def _members(cell: np.ndarray, wanted: np.ndarray) -> dict[int, np.ndarray]:
    """The rows of each cell in `wanted`: one comparison pass per cell when few are wanted, else one sort."""
    if wanted.size <= 32:
        return {int(c): np.flatnonzero(cell == c) for c in wanted}
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.concatenate([wanted, wanted + 1]))
    return {int(c): order[bounds[i] : bounds[i + wanted.size]] for i, c in enumerate(wanted)}


def _search(
    v: np.ndarray, queries: np.ndarray, probes: np.ndarray, cell: np.ndarray, sim: np.ndarray, row: np.ndarray, added: set[int]
) -> set[int]:
    """Each query's best other row among the members of its probed cells (improving sim/row); members for which
    an added query is closer than their entry take it. Returns the rows whose entry changed besides queries."""
    changed: set[int] = set()
    wanted = np.unique(probes)
    members = _members(cell, wanted)
    for c in wanted.tolist():
        m = members[c]
        q = queries[(probes == c).any(axis=1)]
        if m.size == 0 or q.size == 0:
            continue
        s = np.asarray(v[q], dtype=np.float32) @ np.asarray(v[m], dtype=np.float32).T
        s[q[:, None] == m[None, :]] = -np.inf  # a row is not its own neighbour
        best = s.argmax(axis=1)
        best_sim = s[np.arange(q.size), best]
        better = best_sim > sim[q]
        sim[q[better]], row[q[better]] = best_sim[better], m[best[better]]
        new = np.asarray([int(x) in added for x in q], dtype=bool)
        if not new.any():
            continue
        s_new, q_new = s[new], q[new]
        col = s_new.argmax(axis=0)
        col_sim = s_new[col, np.arange(m.size)]
        gain = (col_sim > sim[m]) & ~np.isin(m, list(added))
        sim[m[gain]], row[m[gain]] = col_sim[gain], q_new[col[gain]]
        changed.update(m[gain].tolist())
    return changed
