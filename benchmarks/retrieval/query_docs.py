"""What the retrieval benchmarks share: query vectors timed one at a time, ranked rows as document ids.
Moved whole from benchmarks/retrieval/main.py so that embedding_providers.py (which main.py runs) imports
them without an import cycle."""

from __future__ import annotations

import time

import numpy as np


def timed_query_vectors(idx, queries: dict[str, str]) -> tuple[dict[str, np.ndarray], list[float]]:
    """Each query embedded one at a time as a served question would be (after one warm-up), with its ms."""
    idx.embed_query("warm up")
    vectors, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        vectors[qid] = idx.embed_query(text)
        times.append((time.perf_counter() - t0) * 1000)
    return vectors, times


def to_docs(ranked_rows: list[int], row_doc: list[str], k: int = 100) -> list[str]:
    """Document ids in order of their best chunk (max-chunk aggregation), first k."""
    out, seen = [], set()
    for r in ranked_rows:
        d = row_doc[r]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) == k:
                break
    return out
