"""Each chunk's nearest other chunk, kept up to date incrementally: what the sparse subset is computed from.

The sparse subset (`ragsieve.tools.index.sparse.subset`, COS-Mix arXiv 2406.00638) needs the cosine similarity of
every chunk to its nearest other chunk. Computed from scratch that is O(N^2); kept per row with the nearest
row's number, a change of k chunks costs one (k x N) matrix product plus a full search only for the chunks
whose nearest neighbour was removed:

* new chunks: their similarity to every live chunk, one matrix product; their own best is their entry, and an
  old chunk for which a new chunk is closer than its recorded neighbour takes it;
* chunks whose recorded neighbour was removed or replaced: searched again against all chunks;
* chunks that moved to another row (`ragsieve.tools.index.building.layout`): their entries move, and entries naming
  them are renamed.

The result equals `nearest_neighbour_similarity` of the final vectors (the similarity, to float precision; the
row may differ on exact ties), so the sparse rows and the percentile cut-off are those of a full rebuild. This
exact update serves indexes up to `sparse.APPROXIMATE_ABOVE` rows; above it the base's entries come from the IVF
search (`ragsieve.tools.index.sparse.ann`) and a change searches only inside the cells kept with the index
(`ragsieve.tools.index.sparse.cells`, which shares `relocate`).
"""

from __future__ import annotations

import numpy as np

from ragsieve.tools.index.sparse.subset import similarities_to_all


def nearest_update(
    vectors: np.ndarray,
    old_sim: np.ndarray,
    old_row: np.ndarray,
    n_base: int,
    freed: list[int],
    moved: dict[int, int],
    new_rows: list[int],
    block: int = 1024,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nearest-neighbour arrays of the new generation from those of the base one.

    `vectors`: the new generation's (n, d) vectors; `old_sim` / `old_row`: the base generation's arrays
    (length n_base); `freed`: base rows whose chunk is gone; `moved`: kept chunk old row -> new row;
    `new_rows`: rows of added chunks. Returns (sim, row, touched): touched = rows whose entry differs."""
    n = len(vectors)
    sim, row, touched = relocate(old_sim, old_row, n, n_base, freed, moved)
    added = np.asarray(sorted(new_rows), dtype=np.int64)
    stale = np.flatnonzero(row < 0)  # kept rows whose neighbour is gone (and the added rows, not yet set)
    v = np.asarray(vectors, dtype=np.float32)
    redo = np.setdiff1d(stale, added)
    is_added = np.zeros(n, dtype=bool)
    is_added[added] = True
    queries = np.concatenate([added, redo])  # one pass over the vectors for both (the product is memory-bound)
    for start in range(0, queries.size, block):
        part = queries[start : start + block]
        s = similarities_to_all(v, part)
        best = s.argmax(axis=1)
        sim[part], row[part] = s[np.arange(part.size), best], best
        new = is_added[part]
        if not new.any():
            continue
        s_new, part_new = s[new], part[new]
        col_best = s_new.argmax(axis=0)
        col_sim = s_new[col_best, np.arange(n)]
        better = col_sim > sim  # never true for a redo row: its own search above is exact over all rows
        better[added] = False
        sim[better], row[better] = col_sim[better], part_new[col_best[better]]
        touched.update(np.flatnonzero(better).tolist())
    touched.update(added.tolist())
    touched.update(redo.tolist())
    if n < 2:
        sim[:], row[:] = -np.inf, -1
    return sim, row, np.asarray(sorted(r for r in touched if r < n), dtype=np.int64)


def relocate(
    old_sim: np.ndarray, old_row: np.ndarray, n: int, n_base: int, freed: list[int], moved: dict[int, int]
) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """The base generation's entries carried to the new rows (length n): gone rows and entries naming a gone row
    are (-inf, -1); moved rows take their entries along and entries naming them are renamed. Returns
    (sim, row, touched rows so far)."""
    where = np.arange(n_base, dtype=np.int64)  # base row -> its row now (-1: gone)
    where[np.asarray(sorted(set(freed)), dtype=np.int64)] = -1
    for old, new in moved.items():
        where[old] = new
    sim = np.full(n, -np.inf, dtype=np.float32)
    row = np.full(n, -1, dtype=np.int64)
    kept = np.flatnonzero(where >= 0)
    sim[where[kept]] = np.asarray(old_sim)[kept]
    target = np.asarray(old_row)[kept]
    row[where[kept]] = np.where(target >= 0, where[np.clip(target, 0, None)], -1)
    touched = set(moved.values())
    renamed = where[kept][(target >= 0) & (where[np.clip(target, 0, None)] != target)]
    touched.update(renamed.tolist())
    return sim, row, touched
