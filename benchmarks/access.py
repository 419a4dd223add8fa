"""Permission-aware retrieval benchmark -> benchmarks/results/access.json.

    nice -n 5 .venv/bin/python benchmarks/access.py [--sizes 100000] [--milvus-sizes 20000] [--queries 40]

A synthetic corpus (`scale.synthetic`: N unit vectors, 384-d, clustered like real embeddings, with generated
texts) cut into documents of 10 chunks; a fraction of the documents (50 %, 5 %, 0.5 %) is labelled readable
by `group:reader` (front-matter layer of `<index>/access.json`), the rest by `group:other`. For each fraction:

* hybrid top-10 latency (p50/p95) of the real retriever (`HybridRetriever`, RRF, candidate_k 100) reading as
  `group:reader`, against the same queries unfiltered; the first filtered query (which resolves the labels
  into admitted rows, cached per labels version) is reported apart as `first_query_ms`;
* recall@10 of the filtered search against an exact filtered ranking: BM25 scores of every admitted row
  (`score_rows`) and exact inner products of every admitted row, each cut to the top candidate_k, fused by
  the same RRF. On Milvus (milvus-lite) the BM25 side is Milvus' own (scored by the server) and the reference's
  dense side is exact: the figure measures the filtered ANN search, which is what can lose recall there.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # one query, one thread (as served)
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_io  # noqa: E402
import numpy as np  # noqa: E402
from scale import synthetic  # noqa: E402
from scale_parity import pct  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "access.json"
FRACTIONS = (0.5, 0.05, 0.005)
CHUNKS_PER_DOC = 10
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


def exact_filtered(index, rows: np.ndarray, query: str, qvec: np.ndarray, candidate_k: int = 100,
                   bm25_rows: list[tuple[int, float]] | None = None) -> list[int]:
    from ragsieve.tools.index.query.fusion import rrf

    if bm25_rows is None:
        scores = np.asarray(index.bm25.score_rows(query, rows.tolist()))
        keep = np.flatnonzero(scores > 0)
        order = keep[np.lexsort((rows[keep], -scores[keep]))][:candidate_k]
        bm25_list = [int(rows[i]) for i in order]
    else:
        bm25_list = [r for r, _ in bm25_rows]
    vectors = getattr(index, "exact_vectors", index.vectors)  # Milvus: the same vectors, held here
    sims = np.asarray(vectors[rows], dtype=np.float32) @ qvec
    dense_list = [int(rows[i]) for i in np.lexsort((rows, -sims))[:candidate_k]]
    return [r for r, _ in rrf([bm25_list, dense_list], k=60, weights=[1.0, 1.0])][:10]


def run_fractions(index, n: int, folder: Path, queries, qvecs, backend: str) -> list[dict]:
    from ragsieve.tools.index.query.retriever import HybridRetriever
    from ragsieve.tools.index.query.where import Where

    plain = HybridRetriever(index, fusion="rrf", candidate_k=100, fusion_site="client")
    out = []
    for fraction in FRACTIONS:
        docs_readable = label(folder, n, fraction)
        filtered = plain.with_filter(Where(readers=READER))
        started = time.perf_counter()
        rows = np.asarray(index.filter_rows(Where(readers=READER)), dtype=np.int64)
        first_ms = 1000 * (time.perf_counter() - started)
        for q, qv in zip(queries[:5], qvecs[:5]):  # warm-up (Milvus builds its indexes after a flush)
            plain.run(q, top_k=10, query_vector=qv)
            filtered.run(q, top_k=10, query_vector=qv)
        times_f, times_u, recalls = [], [], []
        for q, qv in zip(queries, qvecs):  # interleaved: the machine's load drifts
            bm25_side = index.bm25.search(q, 100, rows.tolist()) if backend == "milvus" else None
            want = exact_filtered(index, rows, q, qv, bm25_rows=bm25_side)
            t = time.perf_counter()
            plain.run(q, top_k=10, query_vector=qv)
            times_u.append(time.perf_counter() - t)
            t = time.perf_counter()
            hits = filtered.run(q, top_k=10, query_vector=qv)
            times_f.append(time.perf_counter() - t)
            got = [h.row for h in hits]
            recalls.append(len(set(got) & set(want)) / max(1, min(10, len(want))))
        admitted = set(rows.tolist())
        leaked = sum(1 for q, qv in zip(queries[:5], qvecs[:5])
                     for h in filtered.run(q, top_k=10, query_vector=qv) if h.row not in admitted)
        row = {"backend": backend, "chunks": n, "readable_fraction": fraction, "readable_documents": docs_readable,
               "readable_chunks": len(rows), "first_query_ms": round(first_ms, 1),
               "unfiltered_p50_ms": round(1000 * pct(times_u, 0.5), 2),
               "unfiltered_p95_ms": round(1000 * pct(times_u, 0.95), 2),
               "filtered_p50_ms": round(1000 * pct(times_f, 0.5), 2),
               "filtered_p95_ms": round(1000 * pct(times_f, 0.95), 2),
               "p50_ratio": round(pct(times_f, 0.5) / pct(times_u, 0.5), 3),
               "recall@10_vs_exact_filtered": round(float(np.mean(recalls)), 4),
               "hits_outside_the_readable_rows": leaked}
        print("  " + str(row), flush=True)
        out.append(row)
    return out


def local_index(n: int, vectors, texts, work: Path):
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.local.store import ChunkStore
    from ragsieve.tools.index.query.bm25 import BM25Index
    from ragsieve.tools.index.query.dense import DenseIndex
    from ragsieve.tools.types import Chunk

    folder = work / f"local-{n}"
    folder.mkdir()
    store = ChunkStore(folder / "chunks.sqlite")
    for j in range(0, n, CHUNKS_PER_DOC):
        doc = f"docs/d{j // CHUNKS_PER_DOC}"
        store.add_document(doc, doc, "", [Chunk(doc_id=doc, chunk_index=i - j, text=texts[i], source=doc)
                                          for i in range(j, min(n, j + CHUNKS_PER_DOC))])
        if j % 50_000 == 0:
            store.commit()
    store.commit()
    bm25 = BM25Index().build(texts)
    dense = DenseIndex("hnsw", hnsw_m=32, ef_search=128).build(vectors)
    return HybridIndex(folder, folder, {"embedding": {"model": "synthetic"}}, store, bm25, dense, []), folder


def milvus_index(n: int, vectors, texts, work: Path):
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus.index import MilvusIndex
    from ragsieve.tools.index.milvus.schema import analysed, create_collection
    from ragsieve.tools.index.milvus.search import MilvusBM25, MilvusDense
    from ragsieve.tools.index.milvus.store import MilvusStore, MilvusVectors

    folder = work / f"milvus-{n}"
    folder.mkdir()
    client = MilvusClient(str(folder / "milvus.db"))
    create_collection(client, "synthetic", vectors.shape[1], "HNSW")
    for start in range(0, n, 5000):
        client.insert("synthetic", [{"pk": i, "row": i, "born": 0, "died": 2 ** 62,
                                     "doc_id": f"docs/d{i // CHUNKS_PER_DOC}", "chunk_index": i % CHUNKS_PER_DOC,
                                     "text": texts[i], "search_text": analysed(texts[i], True),
                                     "source": f"docs/d{i // CHUNKS_PER_DOC}", "title": "", "kind": "text",
                                     "symbol": "", "line_start": -1, "line_end": -1, "text_hash": "", "doc_hash": "",
                                     "tenant": "default", "dense": vectors[i].tolist()}
                                    for i in range(start, min(n, start + 5000))])
    client.flush("synthetic")
    client.load_collection("synthetic")

    class Synthetic:  # the backend surface the retriever and the access filter use (as benchmarks/scale.py)
        filter_rows, sources = MilvusIndex.filter_rows, MilvusIndex.sources

        def __len__(self):
            return n

    index = Synthetic()
    index.root, index.client, index.pointer, index.visible = folder, client, {"collection": "synthetic"}, None
    index._sources = None
    index.bm25, index.dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
    index.store = MilvusStore(client, "synthetic", n)
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    index.exact_vectors = vectors
    return index, folder, client


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--milvus-sizes", default="20000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--milvus-queries", type=int, default=20, help="milvus-lite answers a query in ~0.2-2 s")
    args = ap.parse_args(argv)
    result = bench_io.header()
    result.update({"device": "CPU only (no accelerator used)", "rows": [],
                   "setup": f"synthetic 384-d clustered vectors and texts (benchmarks/scale.py synthetic), "
                            f"{CHUNKS_PER_DOC} chunks per document; hybrid RRF top-10, candidate_k 100; local "
                            f"FAISS HNSW M=32 efSearch=128 unfiltered, exact numpy over the admitted rows filtered; "
                            f"Milvus HNSW (milvus-lite); BLAS/OpenMP threads 1 (one query, one thread)",
                   "load_note": "2 shared cores busy with other work: compare rows of one run, not absolute times"})
    rng = np.random.default_rng(7)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    milvus_sizes = [int(s) for s in args.milvus_sizes.split(",") if s]
    for n in sorted(set(sizes) | set(milvus_sizes)):
        vectors, texts = synthetic(n, 384, seed=0)
        picks = rng.choice(n, args.queries, replace=False)
        queries = [" ".join(texts[i].split()[:4]) for i in picks]
        qvecs = [vectors[i] for i in picks]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if n in sizes:
                started = time.perf_counter()
                index, folder = local_index(n, vectors, texts, work)
                print(f"local {n}: built in {time.perf_counter() - started:.0f}s", flush=True)
                result["rows"] += run_fractions(index, n, folder, queries, qvecs, "local")
                index.store.close()
            if n in milvus_sizes:
                started = time.perf_counter()
                index, folder, client = milvus_index(n, vectors, texts, work)
                print(f"milvus {n}: built in {time.perf_counter() - started:.0f}s", flush=True)
                m = args.milvus_queries
                result["rows"] += run_fractions(index, n, folder, queries[:m], qvecs[:m], "milvus")
                client.close()
    return bench_io.write(result, OUT)


if __name__ == "__main__":
    sys.exit(main())
