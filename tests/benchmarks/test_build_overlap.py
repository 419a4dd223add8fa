"""BM25 built while the encoder runs gives the same index as building one after the other."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_overlapped_build_equals_sequential_build(tmp_path, embedder):
    for overlap in (True, False):
        IndexBuilder(tmp_path / str(overlap), embedder=embedder, progress=False, overlap=overlap).build([EXAMPLES])
    with HybridIndex.open(tmp_path / "True") as a, HybridIndex.open(tmp_path / "False") as b:
        assert len(a) == len(b) > 10
        for query in ("rotate the API key", "webhook signing secret", "the"):
            assert a.bm25.search(query, 10) == b.bm25.search(query, 10)
        assert np.array_equal(np.asarray(a.vectors), np.asarray(b.vectors))
