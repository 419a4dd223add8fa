"""What the access benchmark measures per readable fraction (`benchmarks/access/main.py`): filtered against unfiltered
hybrid top-10 latency, recall against an exact filtered ranking, and hits outside the readable rows.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.access.indexes import CHUNKS_PER_DOC
from benchmarks.bench_io import percentile as pct

FRACTIONS = (0.5, 0.05, 0.005)
READER = ("group:reader",)


def label(folder: Path, n: int, fraction: float, seed: int = 1) -> int:
    """Write the access labels: each document readable by group:reader with probability `fraction`."""
    from ragsieve.tools.access.labels import AccessLabels, update

    docs = (n + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC
    readable = np.random.default_rng(seed).random(docs) < fraction
    readable[0] = True  # at least one readable document
    table = {f"docs/d{j}": ("group:reader",) if readable[j] else ("group:other",) for j in range(docs)}

    def change(labels: AccessLabels) -> None:
        labels.front_matter = table

    update(folder, change)
    return int(readable.sum())


def exact_filtered(
    index,
    rows: np.ndarray,
    query: str,
    sims_all: np.ndarray,
    candidate_k: int = 100,
    bm25_rows: list[tuple[int, float]] | None = None,
) -> list[int]:
    """The exact filtered hybrid top-10: BM25 and exact inner products of every admitted row (`sims_all`: the
    query's inner product with every row), each cut to candidate_k (ties to the lower row), fused by RRF."""
    from ragsieve.tools.index.query.fusion import rrf

    if bm25_rows is None:
        scores = np.asarray(index.bm25.score_rows(query, rows.tolist()))
        keep = np.flatnonzero(scores > 0)
        order = keep[np.lexsort((rows[keep], -scores[keep]))][:candidate_k]
        bm25_list = [int(rows[i]) for i in order]
    else:
        bm25_list = [r for r, _ in bm25_rows]
    sims = sims_all[rows]
    dense_list = [int(rows[i]) for i in np.lexsort((rows, -sims))[:candidate_k]]
    return [r for r, _ in rrf([bm25_list, dense_list], k=60, weights=[1.0, 1.0])][:10]


def exact_sims(vectors: np.ndarray, qvecs, block: int = 131072) -> list[np.ndarray]:
    """Each query's exact inner product with every row (float32), a block of rows at a time."""
    q = np.stack(qvecs).astype(np.float32)
    out = np.empty((len(q), len(vectors)), dtype=np.float32)
    for start in range(0, len(vectors), block):
        out[:, start : start + block] = (np.asarray(vectors[start : start + block], dtype=np.float32) @ q.T).T
    return list(out)


def hnsw_choice(dense, admitted: int, n: int, candidate_k: int = 100) -> str:
    """What `DenseIndex.search_admitted` does for this many admitted rows: a graph walk (and its efSearch) or
    an exact scan."""
    from ragsieve.tools.index.search.dense import filtered_ef, walk_pays

    ef = filtered_ef(dense.ef_search, candidate_k, admitted / n)
    return f"graph walk, efSearch {ef}" if walk_pays(admitted, ef, dense.hnsw_m) else "exact scan"


def run_fractions(index, n: int, folder: Path, queries, qvecs, sims, backend: str, extra: dict) -> list[dict]:
    from ragsieve.tools.index.query.retriever import HybridRetriever
    from ragsieve.tools.index.search.where import Where

    plain = HybridRetriever(index, fusion="rrf", candidate_k=100, fusion_site="client")
    everything = np.arange(n, dtype=np.int64)
    out = []
    for fraction in FRACTIONS:
        docs_readable = label(folder, n, fraction)
        filtered = plain.with_filter(Where(readers=READER))
        started = time.perf_counter()
        rows = np.asarray(index.filter_rows(Where(readers=READER)), dtype=np.int64)  # resolves (and caches) labels
        first_ms = 1000 * (time.perf_counter() - started)
        for q, qv in zip(queries[:5], qvecs[:5]):  # warm-up (Milvus builds its indexes after a flush)
            plain.run(q, top_k=10, query_vector=qv)
            filtered.run(q, top_k=10, query_vector=qv)
        times_f, times_u, recalls, recalls_u = [], [], [], []
        for q, qv, sv in zip(queries, qvecs, sims):  # interleaved: the machine's load drifts
            bm25_side = index.bm25.search(q, 100, rows.tolist()) if backend == "milvus" else None
            want = exact_filtered(index, rows, q, sv, bm25_rows=bm25_side)
            t = time.perf_counter()
            plain_hits = plain.run(q, top_k=10, query_vector=qv)
            times_u.append(time.perf_counter() - t)
            t = time.perf_counter()
            hits = filtered.run(q, top_k=10, query_vector=qv)
            times_f.append(time.perf_counter() - t)
            got = [h.row for h in hits]
            recalls.append(len(set(got) & set(want)) / max(1, min(10, len(want))))
            if backend != "milvus":  # the ANN's own recall, unfiltered, for comparison
                want_u = exact_filtered(index, everything, q, sv)
                recalls_u.append(len({h.row for h in plain_hits} & set(want_u)) / max(1, min(10, len(want_u))))
        admitted = set(rows.tolist())
        leaked = sum(
            1
            for q, qv in zip(queries[:5], qvecs[:5])
            for h in filtered.run(q, top_k=10, query_vector=qv)
            if h.row not in admitted
        )
        row = {
            "backend": backend,
            **extra,
            "chunks": n,
            "readable_fraction": fraction,
            "readable_documents": docs_readable,
            "readable_chunks": len(rows),
            "queries": len(queries),
            "first_query_ms": round(first_ms, 1),
            "unfiltered_p50_ms": round(1000 * pct(times_u, 0.5), 2),
            "unfiltered_p95_ms": round(1000 * pct(times_u, 0.95), 2),
            "filtered_p50_ms": round(1000 * pct(times_f, 0.5), 2),
            "filtered_p95_ms": round(1000 * pct(times_f, 0.95), 2),
            "p50_ratio": round(pct(times_f, 0.5) / pct(times_u, 0.5), 3),
            "p95_ratio": round(pct(times_f, 0.95) / pct(times_u, 0.95), 3),
            "recall@10_vs_exact_filtered": round(float(np.mean(recalls)), 4),
            "hits_outside_the_readable_rows": leaked,
        }
        if recalls_u:
            row["unfiltered_recall@10_vs_exact"] = round(float(np.mean(recalls_u)), 4)
        if backend == "local" and extra.get("faiss") == "hnsw":
            row["filtered_dense"] = hnsw_choice(index.dense, len(rows), n)
        print("  " + str(row), flush=True)
        out.append(row)
    return out
