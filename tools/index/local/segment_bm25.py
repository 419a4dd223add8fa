"""BM25 over the segments of an incremental generation, scored at query time from term frequencies.

A precomputed-score index (bm25s) bakes the corpus statistics (N, avgdl, df) into every stored score, so one
changed document would change them all. Here the segments store raw term frequencies and document lengths,
and a query computes Lucene's BM25 (Robertson & Zaragoza 2009; Lucene variant, Kamphuis et al. ECIR 2020;
`ragsieve.tools.index.search.bm25.lucene_bm25_scores` is the brute-force reference):

    score(d, q) = sum over query tokens t (repeats count again) of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

with N, avgdl and df taken over the live rows of this generation (each row's postings from the segment that
owns it), so an incremental generation scores exactly like a full rebuild of the same corpus.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.search.bm25 import BM25Index, tokenize
from ragsieve.tools.modes import BM25Engine

if TYPE_CHECKING:
    from ragsieve.tools.index.local.segments import SegmentView


def lucene_term_scores(tf: np.ndarray, dl: np.ndarray, df: int, n_docs: int, avgdl: float, k1: float, b: float) -> np.ndarray:
    """Lucene BM25 contribution of one term to the documents holding it (see the module docstring)."""
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    tf = tf.astype(np.float64)
    return idf * tf / (tf + k1 * (1.0 - b + b * dl.astype(np.float64) / avgdl))


class SegmentBM25(BM25Index):
    """The `BM25Index` surface (`scores`, `search`, `score_rows`) over a `SegmentView`."""

    def __init__(self, view: SegmentView, params: dict) -> None:
        super().__init__(
            BM25Engine.BM25S,
            k1=params["k1"],
            b=params["b"],
            stem=params["stem"],
            identifiers=params.get("identifiers", False),
            compounds=params.get("compounds", False),
        )
        self.view = view
        self.n_docs = view.n
        self._model = self  # built: `scores` never reaches the bm25s branch
        self._avgdl: float | None = None

    @property
    def params(self) -> dict:
        return super().params | {"storage": "segments"}

    def save(self, directory: str | Path) -> None:  # the segments are the storage
        raise UsageError("a segment BM25 index is written with its segments, not saved on its own")

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n_docs, dtype=np.float64)
        if self.n_docs == 0:
            return out
        dl = self.view.dl
        if self._avgdl is None:
            self._avgdl = float(dl.sum()) / self.n_docs or 1.0
        for term, count in Counter(tokenize(query, self.stem, self.identifiers)).items():
            rows, tf = self.view.postings(term)
            if rows.size:
                out[rows] += count * lucene_term_scores(tf, dl[rows], rows.size, self.n_docs, self._avgdl, self.k1, self.b)
        return out
