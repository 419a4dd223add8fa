"""Permission-aware retrieval benchmark -> benchmarks/results/access.json.

    nice -n 10 .venv/bin/python benchmarks/access.py [--sizes 100000,1000000] [--hnsw-sizes 100000]
        [--milvus-sizes 20000] [--queries 40] [--hnsw-cache DIR] [--merge]

A synthetic corpus (`clustered`: N unit vectors, 384-d, around N/50 random centres, with generated texts:
a proxy, since the cost measured is the filter's, not the embedding's) cut into documents of 10 chunks; a
fraction of the documents (50 %, 5 %, 0.5 %) is labelled readable by `group:reader` (front-matter layer of
`<index>/access.json`), the rest by `group:other`. For each fraction, backend and local FAISS kind (flat, the
default, and HNSW):

* hybrid top-10 latency (p50/p95) of the real retriever (`HybridRetriever`, RRF, candidate_k 100) reading as
  `group:reader`, against the same queries unfiltered, interleaved query by query (the shared machine's load
  drifts: compare the ratios of a row); the first filtered query, which resolves the labels into the admitted
  rows (cached per filter and labels version), is reported apart as `first_query_ms`;
* recall@10 of the filtered search against an exact filtered ranking: BM25 scores of every admitted row
  (`score_rows`) and exact inner products of every admitted row, each cut to the top candidate_k (ties to the
  lower row), fused by the same RRF; beside it the unfiltered search's recall against the exact unfiltered
  ranking (what the ANN index loses by itself). On Milvus (milvus-lite) the BM25 side is Milvus' own (scored
  by the server) and the reference's dense side is exact: the figure measures the filtered ANN search.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
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


def exact_filtered(index, rows: np.ndarray, query: str, sims_all: np.ndarray, candidate_k: int = 100,
                   bm25_rows: list[tuple[int, float]] | None = None) -> list[int]:
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
        out[:, start:start + block] = (np.asarray(vectors[start:start + block], dtype=np.float32) @ q.T).T
    return list(out)


def run_fractions(index, n: int, folder: Path, queries, qvecs, sims, backend: str, extra: dict) -> list[dict]:
    from ragsieve.tools.index.query.retriever import HybridRetriever
    from ragsieve.tools.index.query.where import Where

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
        leaked = sum(1 for q, qv in zip(queries[:5], qvecs[:5])
                     for h in filtered.run(q, top_k=10, query_vector=qv) if h.row not in admitted)
        row = {"backend": backend, **extra, "chunks": n, "readable_fraction": fraction,
               "readable_documents": docs_readable, "readable_chunks": len(rows), "queries": len(queries),
               "first_query_ms": round(first_ms, 1),
               "unfiltered_p50_ms": round(1000 * pct(times_u, 0.5), 2),
               "unfiltered_p95_ms": round(1000 * pct(times_u, 0.95), 2),
               "filtered_p50_ms": round(1000 * pct(times_f, 0.5), 2),
               "filtered_p95_ms": round(1000 * pct(times_f, 0.95), 2),
               "p50_ratio": round(pct(times_f, 0.5) / pct(times_u, 0.5), 3),
               "p95_ratio": round(pct(times_f, 0.95) / pct(times_u, 0.95), 3),
               "recall@10_vs_exact_filtered": round(float(np.mean(recalls)), 4),
               "hits_outside_the_readable_rows": leaked}
        if recalls_u:
            row["unfiltered_recall@10_vs_exact"] = round(float(np.mean(recalls_u)), 4)
        print("  " + str(row), flush=True)
        out.append(row)
    return out


def local_parts(n: int, texts, work: Path):
    """The chunk store (10 chunks a document) and BM25 index, shared by the FAISS kinds measured."""
    from ragsieve.tools.index.local.store import ChunkStore
    from ragsieve.tools.index.query.bm25 import BM25Index
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
    return folder, store, BM25Index().build(texts)


def local_index(folder: Path, store, bm25, vectors, kind: str, hnsw_m: int, ef_construction: int,
                cache: Path | None = None):
    """A local index over the shared parts with a FAISS index of `kind` (HNSW built on both cores). With `cache`,
    an HNSW graph an earlier run built from the same seeded vectors is read from it (checked: same rows, same
    stored vectors), and one built here is written there: the build is the slow part (minutes at 100k)."""
    import faiss

    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.query.dense import DenseIndex

    dense = DenseIndex(kind, hnsw_m=hnsw_m, ef_search=128, ef_construction=ef_construction)
    saved = None if cache is None or kind != "hnsw" else cache / f"hnsw-{len(vectors)}-{hnsw_m}-{ef_construction}.faiss"
    read = False
    if saved is not None and saved.is_file():
        graph = faiss.read_index(str(saved))
        probe = [0, len(vectors) // 2, len(vectors) - 1]
        if graph.ntotal == len(vectors) and np.array_equal(np.stack([graph.reconstruct(i) for i in probe]),
                                                           vectors[probe]):
            dense._set(graph, vectors)
            read = True
    if not read:
        faiss.omp_set_num_threads(2)
        try:
            dense.build(vectors)
        finally:
            faiss.omp_set_num_threads(1)  # queries: one thread, as served
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            faiss.write_index(dense._index, str(saved))
    index = HybridIndex(folder, folder, {"embedding": {"model": "synthetic"}}, store, bm25, dense, [])
    return index, (str(saved) if read else None)


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
        filter_rows, sources, admitted = MilvusIndex.filter_rows, MilvusIndex.sources, MilvusIndex.admitted
        lexical_within, dense_within = MilvusIndex.lexical_within, MilvusIndex.dense_within
        symbols = None  # Milvus keeps no symbol table

        def __len__(self):
            return n

    index = Synthetic()
    index.root, index.client, index.pointer, index.visible = folder, client, {"collection": "synthetic"}, None
    index._sources, index._filter_cache, index._lock = None, {}, threading.Lock()
    index.bm25, index.dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
    index.store = MilvusStore(client, "synthetic", n)
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    index.exact_vectors = vectors
    return index, folder, client


def clustered(n: int, seed: int = 0):
    """`scale.synthetic` vectors around n / 50 random unit centres (a vector keeps cosine ~0.86 to its centre):
    clustered like text embeddings, where isotropic random vectors are an ANN index's worst case."""
    centres = np.random.default_rng(seed + 1).standard_normal((max(1, n // 50), 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return synthetic(n, 384, seed=seed, base=centres)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--faiss", default="flat,hnsw", help="local FAISS kinds measured (flat is the default)")
    ap.add_argument("--hnsw-m", default="100000:32,1000000:16", help="HNSW M per size (SIZE:M,...)")
    ap.add_argument("--ef-construction", default="100000:200,1000000:40", help="HNSW efConstruction per size")
    ap.add_argument("--milvus-sizes", default="20000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--milvus-queries", type=int, default=20, help="milvus-lite answers a query in ~0.2-2 s")
    ap.add_argument("--hnsw-sizes", default="100000", help="sizes at which the HNSW kind is measured")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of the other backend from the result file, with their run's header")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--hnsw-cache", type=Path, help="read/write the HNSW graphs built from the seeded vectors here")
    args = ap.parse_args(argv)
    per_size = (lambda text: {int(k): int(v) for k, v in (p.split(":") for p in text.split(",") if p)})
    hnsw_m, ef_construction = per_size(args.hnsw_m), per_size(args.ef_construction)
    result = bench_io.header()
    result.update({"device": "CPU only (no accelerator used)", "rows": [],
                   "setup": f"synthetic 384-d vectors clustered around n/50 random centres and synthetic texts "
                            f"(benchmarks/scale.py synthetic): a proxy, the cost measured is the filter's, not "
                            f"the embedding's; {CHUNKS_PER_DOC} chunks per document, a fraction of documents "
                            f"readable by the caller; hybrid RRF top-10, candidate_k 100; local: the filter "
                            f"resolved once per labels version into an admitted-row set (sorted rows, mask, FAISS "
                            f"bitmap), BM25 restricted by its mask; dense: flat exact (a FAISS scan skipping "
                            f"rows outside the bitmap when >= 1/4 are admitted, else the admitted rows' vectors "
                            f"ranked), HNSW a graph walk keeping only admitted rows (IDSelectorBitmap, efSearch "
                            f"128/fraction) when > 8192 rows and >= 20 % are admitted, else the admitted rows "
                            f"ranked exactly; HNSW built on 2 threads (M and efConstruction per row), queries on "
                            f"1 thread (BLAS/OpenMP threads 1); HNSW only at --hnsw-sizes (building one over 1M "
                            f"rows takes over an hour on this shared machine: 100k took 587 s); Milvus: "
                            f"milvus-lite HNSW M=32, the resolved filter cached, a broad filtered dense search "
                            f"sent as its own expression (source in [...]) with ef max(1024, 512/fraction), a "
                            f"narrow one (<= 2048 rows) ranked exactly from the rows' vectors",
                   "load_note": "2 shared cores busy with other work: filtered and unfiltered queries interleaved, "
                                "compare the ratios of one row, not absolute times"})
    rng = np.random.default_rng(7)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    milvus_sizes = [int(s) for s in args.milvus_sizes.split(",") if s]
    if args.merge and args.out.is_file():  # rows of a backend this run does not measure, kept with their header
        import json

        earlier = json.loads(args.out.read_text(encoding="utf-8"))
        measured = {"local"} if sizes else set()
        measured |= {"milvus"} if milvus_sizes else set()
        kept = [r for r in earlier.get("rows", []) if r["backend"] not in measured]
        if kept:
            result["rows"] = kept
            result["earlier_part"] = {k: earlier.get(k) for k in ("command", "commit", "load_average_at_start",
                                                                 "load_average_at_end")}
            result["earlier_part"]["backends"] = sorted({r["backend"] for r in kept})
    for n in sorted(set(sizes) | set(milvus_sizes)):
        vectors, texts = clustered(n)
        picks = rng.choice(n, args.queries, replace=False)
        queries = [" ".join(texts[i].split()[:4]) for i in picks]
        qvecs = [vectors[i] for i in picks]
        sims = exact_sims(vectors, qvecs)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if n in sizes:
                started = time.perf_counter()
                folder, store, bm25 = local_parts(n, texts, work)
                print(f"local {n}: store and BM25 built in {time.perf_counter() - started:.0f}s", flush=True)
                hnsw_here = n in [int(x) for x in args.hnsw_sizes.split(",") if x]
                for kind in [k for k in args.faiss.split(",") if k and (k != "hnsw" or hnsw_here)]:
                    started = time.perf_counter()
                    m, efc = hnsw_m.get(n, 32), ef_construction.get(n, 200)
                    index, read_from = local_index(folder, store, bm25, vectors, kind, m, efc, args.hnsw_cache)
                    built = round(time.perf_counter() - started, 1)
                    print(f"local {n} {kind}: built in {built}s", flush=True)
                    extra = {"faiss": kind, "faiss_build_s": built} if read_from is None else \
                        {"faiss": kind, "faiss_graph_read_from": read_from}
                    if kind == "hnsw":
                        extra.update(hnsw_m=m, ef_construction=efc, ef_search=128)
                    result["rows"] += run_fractions(index, n, folder, queries, qvecs, sims, "local", extra)
                    bench_io.write(dict(result), args.out)  # a partial result survives an interruption
                    del index
                store.close()
            if n in milvus_sizes:
                started = time.perf_counter()
                index, folder, client = milvus_index(n, vectors, texts, work)
                print(f"milvus {n}: built in {time.perf_counter() - started:.0f}s", flush=True)
                m = args.milvus_queries
                result["rows"] += run_fractions(index, n, folder, queries[:m], qvecs[:m], sims[:m], "milvus", {})
                client.close()
                bench_io.write(dict(result), args.out)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
