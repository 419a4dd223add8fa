"""Segments of an incremental (format 2) generation: a base plus small delta segments, later ones winning per row.

A segment is an immutable folder `segments/seg-<id>/` that sets the content of some rows:

    rows.npy        the rows it sets (int64, sorted)
    vectors.npy     their vectors (the base pads to a capacity: rows past the live end stay zero)
    dl.npy          their BM25 document lengths (tokens)
    vocab.json      its terms; indptr.npy / docs.npy / tf.npy: term -> (local doc, term frequency) postings
    nn_rows.npy, nn_sim.npy, nn_row.npy   nearest-neighbour overrides (`ragsieve.tools.index.sparse.nearest`)
    cell.npy        optional: the IVF cell of each row it sets; the base then also holds centroids.npy
                    (`ragsieve.tools.index.sparse.cells`; absent in indexes written before, and below the IVF size)

A generation lists its segments in order (`manifest["segments"]`); each is a set of hard links to the files of
the generation that wrote it, so a new generation writes only its own small segment and links the others
(O(1) per file, never a copy). Reading row r takes it from the last segment that sets r (`owner`); rows from
the generation's row count on are gone. The base is the first segment: rows 0..n-1 of the generation that
wrote it, its vectors padded with spare rows so the reader maps it copy-on-write (`np.load(mmap_mode="c")`)
and applies the deltas in memory without touching the file.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsieve.tools.index.search import npy

SEGMENTS = "segments"
_ARRAYS = ("rows", "vectors", "dl", "indptr", "docs", "tf", "nn_rows", "nn_sim", "nn_row")
_OPTIONAL = ("cell", "centroids")


@dataclass
class Segment:
    """The arrays of one segment (memory-mapped when read)."""

    name: str
    rows: np.ndarray
    vectors: np.ndarray
    dl: np.ndarray
    vocab: list[str]
    indptr: np.ndarray
    docs: np.ndarray
    tf: np.ndarray
    nn_rows: np.ndarray
    nn_sim: np.ndarray
    nn_row: np.ndarray
    cell: np.ndarray | None = None
    centroids: np.ndarray | None = None
    _term_ids: dict | None = None

    def term_id(self, term: str) -> int | None:
        if self._term_ids is None:
            self._term_ids = {t: i for i, t in enumerate(self.vocab)}
        return self._term_ids.get(term)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of `term` in this segment."""
        t = self.term_id(term)
        if t is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
        return self.rows[np.asarray(self.docs[lo:hi], dtype=np.int64)], np.asarray(self.tf[lo:hi])


def postings_of(token_lists: list[list[str]]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(vocab, indptr, docs, tf, dl) of documents given as token lists: a term-major CSR of term frequencies."""
    vocab: dict[str, int] = {}
    terms, docs, tfs = [], [], []
    for i, tokens in enumerate(token_lists):
        for term, tf in Counter(tokens).items():
            terms.append(vocab.setdefault(term, len(vocab)))
            docs.append(i)
            tfs.append(tf)
    return _csr(
        list(vocab), np.asarray(terms, dtype=np.int64), np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=np.int32)
    ) + (np.asarray([len(t) for t in token_lists], dtype=np.int32),)


Postings = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]  # (vocab, indptr, docs, tf): a term-major CSR


def _csr(vocab: list[str], terms: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> Postings:
    order = np.lexsort((docs, terms))
    counts = np.bincount(terms, minlength=len(vocab))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return vocab, indptr, docs[order].astype(np.int32), tf[order].astype(np.int32)


def write_segment(
    folder: Path,
    rows: npt.ArrayLike,
    vectors: npt.ArrayLike,
    dl: npt.ArrayLike,
    postings: Postings,
    nn_rows: npt.ArrayLike,
    nn_sim: npt.ArrayLike,
    nn_row: npt.ArrayLike,
    cell: npt.ArrayLike | None = None,
    centroids: npt.ArrayLike | None = None,
) -> int:
    """Write one segment folder; `postings` = (vocab, indptr, docs, tf); `cell`: the IVF cell of each of
    `rows` (and, in a base, the `centroids`), or None. Returns the bytes written."""
    folder.mkdir(parents=True)
    vocab, indptr, docs, tf = postings
    arrays: dict[str, np.ndarray] = {
        "rows": np.asarray(rows, dtype=np.int64),
        "vectors": np.asarray(vectors, dtype=np.float32),
        "dl": np.asarray(dl, dtype=np.int32),
        "indptr": indptr,
        "docs": docs,
        "tf": tf,
        "nn_rows": np.asarray(nn_rows, dtype=np.int64),
        "nn_sim": np.asarray(nn_sim, dtype=np.float32),
        "nn_row": np.asarray(nn_row, dtype=np.int64),
    }
    if cell is not None:
        arrays["cell"] = np.asarray(cell, dtype=np.int32)
    if centroids is not None:
        arrays["centroids"] = np.asarray(centroids, dtype=np.float32)
    for name, arr in arrays.items():
        np.save(folder / f"{name}.npy", arr)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return sum(f.stat().st_size for f in folder.iterdir())


def read_segment(folder: Path) -> Segment:
    arrays: dict[str, Any] = {name: npy.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    for name in _OPTIONAL:
        if (folder / f"{name}.npy").is_file():
            arrays[name] = npy.load(folder / f"{name}.npy", mmap_mode="r")
    return Segment(name=folder.name, vocab=json.loads((folder / "vocab.json").read_text(encoding="utf-8")), **arrays)


def link_segments(src_gen: Path, dst_gen: Path, names: list[str]) -> None:
    """Hard-link the files of segments `names` of generation `src_gen` into `dst_gen` (O(1) per file)."""
    for name in names:
        src, dst = src_gen / SEGMENTS / name, dst_gen / SEGMENTS / name
        dst.mkdir(parents=True)
        for f in src.iterdir():
            os.link(f, dst / f.name)


class SegmentView:
    """The rows 0..n-1 of a generation, composed from its segments (see the module docstring)."""

    def __init__(self, gen: Path, names: list[str], n: int) -> None:
        self.gen, self.names, self.n = Path(gen), list(names), int(n)
        self.segments = [read_segment(self.gen / SEGMENTS / name) for name in self.names]
        self.owner = np.full(self.n, -1, dtype=np.int16)
        for i, seg in enumerate(self.segments):
            rows = np.asarray(seg.rows)
            self.owner[rows[rows < self.n]] = i
        if self.n and (self.owner < 0).any():
            raise ValueError(f"{gen}: rows {np.flatnonzero(self.owner < 0)[:5].tolist()} belong to no segment")
        self._vectors: np.ndarray | None = None
        self._dl: np.ndarray | None = None
        self._nn: tuple[np.ndarray, np.ndarray] | None = None

    def _overlay(self, base: np.ndarray, pick: Callable[[Segment], tuple[Any, Any]]) -> np.ndarray:
        out = base
        for seg in self.segments[1:]:
            rows, values = pick(seg)
            keep = np.asarray(rows) < self.n
            if keep.any():
                out[np.asarray(rows)[keep]] = np.asarray(values)[keep]
        return out

    @property
    def vectors(self) -> np.ndarray:
        """The (n, d) vectors: the base mapped copy-on-write, the deltas written over it in memory only."""
        if self._vectors is None:
            base = npy.load(self.gen / SEGMENTS / self.names[0] / "vectors.npy", mmap_mode="c")
            if len(base) < self.n:
                raise ValueError(f"{self.gen}: base holds {len(base)} rows, the generation {self.n}")
            self._vectors = self._overlay(base[: self.n], lambda s: (s.rows, s.vectors))
        return self._vectors

    @property
    def dl(self) -> np.ndarray:
        if self._dl is None:
            base = np.zeros(self.n, dtype=np.int64)
            b = self.segments[0]
            keep = np.asarray(b.rows) < self.n
            base[np.asarray(b.rows)[keep]] = np.asarray(b.dl)[keep]
            self._dl = self._overlay(base, lambda s: (s.rows, s.dl))
        return self._dl

    def dl_of(self, rows: Iterable[int]) -> int:
        """Sum of the BM25 lengths of `rows`, each read from the segment that owns it (O(len(rows)))."""
        total = 0
        for r in rows:
            seg = self.segments[int(self.owner[r])]
            total += int(seg.dl[int(np.searchsorted(seg.rows, r))])
        return total

    def cells(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(centroids, cell of every row) when every segment records cells (`ragsieve.tools.index.sparse.cells`),
        else None (an index written before, or one below the IVF size)."""
        b = self.segments[0]
        if b.centroids is None or any(s.cell is None for s in self.segments):
            return None
        cell = np.full(self.n, -1, dtype=np.int32)
        keep = np.asarray(b.rows) < self.n
        cell[np.asarray(b.rows)[keep]] = np.asarray(b.cell)[keep]
        return np.asarray(b.centroids), self._overlay(cell, lambda s: (s.rows, s.cell))

    def nearest(self) -> tuple[np.ndarray, np.ndarray]:
        """(nearest-neighbour similarity, nearest row) of every row."""
        if self._nn is None:
            b = self.segments[0]
            sim = np.full(self.n, -np.inf, dtype=np.float32)
            row = np.full(self.n, -1, dtype=np.int64)
            keep = np.asarray(b.nn_rows) < self.n
            sim[np.asarray(b.nn_rows)[keep]] = np.asarray(b.nn_sim)[keep]
            row[np.asarray(b.nn_rows)[keep]] = np.asarray(b.nn_row)[keep]
            sim = self._overlay(sim, lambda s: (s.nn_rows, s.nn_sim))
            row = self._overlay(row, lambda s: (s.nn_rows, s.nn_row))
            self._nn = (sim, row)
        return self._nn

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, tf) of `term` over the live rows: each segment's postings of the rows it owns."""
        rows_out, tf_out = [], []
        for i, seg in enumerate(self.segments):
            rows, tf = seg.postings(term)
            if rows.size:
                live = rows < self.n
                rows, tf = rows[live], tf[live]
                mine = self.owner[rows] == i
                rows_out.append(rows[mine])
                tf_out.append(tf[mine])
        if not rows_out:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return np.concatenate(rows_out), np.concatenate(tf_out)

    def merged_postings(
        self, segments: list[int] | None = None, rows_filter: np.ndarray | None = None
    ) -> tuple[Postings, np.ndarray, np.ndarray]:
        """The postings of the rows owned by `segments` (default: all) as one term-major CSR over those rows:
        (vocab, indptr, docs, tf, rows, dl) with docs indexing `rows`. No text is tokenized again."""
        chosen = range(len(self.segments)) if segments is None else segments
        mask = np.zeros(self.n, dtype=bool)
        for i in chosen:
            mask |= self.owner == i
        if rows_filter is not None:
            mask &= rows_filter
        rows = np.flatnonzero(mask)
        local = np.full(self.n, -1, dtype=np.int64)
        local[rows] = np.arange(rows.size)
        vocab: dict[str, int] = {}
        terms, docs, tfs = [], [], []
        for i in chosen:
            seg = self.segments[i]
            if not seg.vocab:
                continue
            ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in seg.vocab), dtype=np.int64, count=len(seg.vocab))
            counts = np.diff(np.asarray(seg.indptr))
            seg_terms = np.repeat(ids, counts)
            seg_rows = np.asarray(seg.rows)[np.asarray(seg.docs, dtype=np.int64)]
            keep = seg_rows < self.n
            keep[keep] = (self.owner[seg_rows[keep]] == i) & mask[seg_rows[keep]]
            terms.append(seg_terms[keep])
            docs.append(local[seg_rows[keep]])
            tfs.append(np.asarray(seg.tf)[keep])
        cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dtype=dt)
        postings = _csr(list(vocab), cat(terms, np.int64), cat(docs, np.int64), cat(tfs, np.int32))
        return postings, rows, self.dl[rows]


class NumpyFlat:
    """Exact inner-product search over the composed vectors, with FAISS's `search` shape (a flat FAISS index
    would need its own copy of the vectors; this reads the copy-on-write mapping)."""

    def __init__(self, vectors: np.ndarray, block: int = 65536) -> None:
        self.vectors, self.block = vectors, block

    def search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.vectors)
        sims = np.empty(n, dtype=np.float32)
        for start in range(0, n, self.block):
            sims[start : start + self.block] = self.vectors[start : start + self.block] @ q[0]
        k = min(k, n)
        top = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        top = top[np.lexsort((top, -sims[top]))]
        return sims[top][None, :], top[None, :].astype(np.int64)
