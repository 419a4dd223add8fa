"""Permission-aware retrieval benchmark -> benchmarks/results/access.json.

    nice -n 10 .venv/bin/python -m benchmarks.access.main [--sizes 100000,1000000] [--hnsw-sizes 100000]
        [--milvus-sizes 20000] [--queries 40] [--hnsw-cache DIR] [--walk-width W] [--merge] [--out FILE]

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
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # one query, one thread (as served)
    os.environ.setdefault(_var, "1")
import numpy as np  # noqa: E402

from benchmarks import bench_io  # noqa: E402
from benchmarks.access.indexes import CHUNKS_PER_DOC, clustered, local_index, local_parts, milvus_index  # noqa: E402
from benchmarks.access.measure import exact_sims, run_fractions  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results" / "access.json"


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
    ap.add_argument(
        "--merge", action="store_true", help="keep the rows of the other backend from the result file, with their run's header"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--hnsw-cache", type=Path, help="read/write the HNSW graphs built from the seeded vectors here")
    ap.add_argument(
        "--walk-width",
        type=float,
        help="measure a filtered HNSW walk of this many times the "
        "unfiltered budget per admitted row (the product's WALK_WIDTH otherwise)",
    )
    args = ap.parse_args(argv)
    if args.walk_width is not None:  # a trade-off point, not the product's setting: recorded in each row
        from ragsieve.tools.index.search import dense

        dense.WALK_WIDTH = args.walk_width
    per_size = lambda text: {int(k): int(v) for k, v in (p.split(":") for p in text.split(",") if p)}
    hnsw_m, ef_construction = per_size(args.hnsw_m), per_size(args.ef_construction)
    result = bench_io.header()
    result.update(
        {
            "device": "CPU only (no accelerator used)",
            "rows": [],
            "setup": f"synthetic 384-d vectors clustered around n/50 random centres and synthetic texts "
            f"(benchmarks/access/indexes.py synthetic): a proxy, the cost measured is the filter's, not "
            f"the embedding's; {CHUNKS_PER_DOC} chunks per document, a fraction of documents "
            f"readable by the caller; hybrid RRF top-10, candidate_k 100; local: the filter "
            f"resolved once per labels version into an admitted-row set (sorted rows, mask, FAISS "
            f"bitmap), BM25 restricted by its mask; dense: flat exact (a FAISS scan skipping "
            f"rows outside the bitmap when >= 1/32 are admitted, else the admitted rows' vectors "
            f"ranked), HNSW by a cost model either a graph walk keeping only admitted rows "
            f"(IDSelectorBitmap, efSearch 2 x 128/fraction) when more than 2M x that efSearch rows "
            f"are admitted, or the same exact scan as flat (each row's `filtered_dense` says "
            f"which); HNSW built on 2 threads (M and efConstruction per row), queries on "
            f"1 thread (BLAS/OpenMP threads 1); HNSW only at --hnsw-sizes (building one over 1M "
            f"rows takes over an hour on this shared machine: 100k took 587 s); Milvus: "
            f"milvus-lite HNSW M=32, the filter resolved from the row file a publish writes "
            f"(milvus-sparse/meta-<gen>.npz) and cached, a broad filtered dense search "
            f"sent as its own expression (source in [...]) with ef max(1024, 512/fraction), a "
            f"narrow one (<= 2048 rows) ranked exactly from the rows' vectors",
            "load_note": "2 shared cores busy with other work: filtered and unfiltered queries interleaved, "
            "compare the ratios of one row, not absolute times",
        }
    )
    rng = np.random.default_rng(7)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    milvus_sizes = [int(s) for s in args.milvus_sizes.split(",") if s]
    if args.merge and args.out.is_file():  # rows of a backend this run does not measure, each naming its run
        import json

        earlier = json.loads(args.out.read_text(encoding="utf-8"))
        measured = {"local"} if sizes else set()
        measured |= {"milvus"} if milvus_sizes else set()
        run = ("command", "commit", "load_average_at_start", "load_average_at_end")
        result["rows"] = [
            {**{k: earlier.get(k) for k in run}, **r}  # a row's own run fields win
            for r in earlier.get("rows", [])
            if r["backend"] not in measured
        ]
        for key, value in earlier.items():  # notes on earlier and superseded runs stay
            if key not in result and key not in ("earlier_part", "load_average_at_end"):
                result[key] = value
        result["parts"] = (
            "rows measured by this file's command (commit and load averages at the top), and "
            "rows of the other backend kept by --merge, each carrying the command, commit and "
            "load averages of the run that measured it"
        )
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
                    extra = (
                        {"faiss": kind, "faiss_build_s": built}
                        if read_from is None
                        else {"faiss": kind, "faiss_graph_read_from": read_from}
                    )
                    if kind == "hnsw":
                        from ragsieve.tools.index.search.dense import WALK_WIDTH

                        extra.update(hnsw_m=m, ef_construction=efc, ef_search=128, walk_width=WALK_WIDTH)
                    result["rows"] += run_fractions(index, n, folder, queries, qvecs, sims, "local", extra)
                    bench_io.write(dict(result), args.out)  # a partial result survives an interruption
                    del index
                store.close()
            if n in milvus_sizes:
                started = time.perf_counter()
                index, folder, client = milvus_index(n, vectors, texts, work)
                print(f"milvus {n}: built in {time.perf_counter() - started:.0f}s", flush=True)
                m = args.milvus_queries
                from importlib.metadata import version

                server = {"server": f"milvus-lite {version('milvus-lite')} (pymilvus {version('pymilvus')})"}
                result["rows"] += run_fractions(index, n, folder, queries[:m], qvecs[:m], sims[:m], "milvus", server)
                client.close()
                bench_io.write(dict(result), args.out)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
