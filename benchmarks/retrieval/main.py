"""Retrieval benchmark on a BEIR set (default SciFact test): BM25 engines, dense, hybrid fusions.

    .venv/bin/python -m benchmarks.retrieval.main [--data ../shared/data/scifact] [--split test]

Builds (or reuses) an index of the corpus with the default embedding model,
then reports, per method, document-level nDCG@10 and Recall@100 (a document
scores as its best chunk) and per-query latency p50/p95 in ms. Dense and
hybrid latencies exclude embedding the query, reported separately
(`query_embedding_ms`). Writes one JSON file with the command line, machine
and package versions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from ragsieve.tools.datasets.beir import read_qrels, read_queries  # noqa: E402
from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.index.building.report import indexed_text  # noqa: E402
from ragsieve.tools.index.building.report import package_version as _version  # noqa: E402
from ragsieve.tools.index.local.index import HybridIndex  # noqa: E402
from ragsieve.tools.index.query.retriever import HybridRetriever  # noqa: E402
from ragsieve.tools.index.search.bm25 import BM25Index  # noqa: E402
from ragsieve.tools.metrics import ndcg_at_k, recall_at_k  # noqa: E402


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


def load_beir(data: Path, split: str) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    queries = read_queries(data / "queries.jsonl")
    qrels = read_qrels(data / "qrels" / f"{split}.tsv")
    return {q: queries[q] for q in qrels}, qrels


def evaluate(name: str, search, queries: dict[str, str], qrels, row_doc: list[str]) -> dict:
    ndcgs, recalls, times = [], [], []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        rows = search(qid, text)
        times.append((time.perf_counter() - t0) * 1000)
        docs = to_docs(rows, row_doc)
        ndcgs.append(ndcg_at_k(docs, qrels[qid]))
        recalls.append(recall_at_k(docs, qrels[qid], 100))
    res = {
        "ndcg@10": round(float(np.mean(ndcgs)), 4),
        "recall@100": round(float(np.mean(recalls)), 4),
        "latency_ms_p50": round(float(np.percentile(times, 50)), 3),
        "latency_ms_p95": round(float(np.percentile(times, 95)), 3),
    }
    print(f"{name:>18}: {res}", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_scifact.json")
    ap.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-bench")
    ap.add_argument("--limit-queries", type=int, default=None)
    ap.add_argument("--chunk-tokens", type=int, default=None, help="default: what `ragsieve index` uses")
    ap.add_argument("--depth", type=int, default=200, help="chunk rows retrieved per query by single retrievers")
    ap.add_argument("--skip-rank-bm25", action="store_true")
    args = ap.parse_args(argv)

    load_at_start = os.getloadavg()
    if args.chunk_tokens is None:
        import inspect

        args.chunk_tokens = inspect.signature(IndexBuilder).parameters["chunk_tokens"].default
    corpus = next(p for p in (args.data / "corpus.jsonl.gz", args.data / "corpus.jsonl") if p.is_file())
    index_dir = args.index_dir / f"{args.data.name}-c{args.chunk_tokens}"
    report = IndexBuilder(index_dir, chunk_tokens=args.chunk_tokens, progress=True).build([corpus])
    print(report.summary(), flush=True)
    idx = HybridIndex.open(index_dir)
    n = len(idx)
    chunks = idx.store.get_many(range(n))
    row_doc = [c.doc_id for c in chunks]
    queries, qrels = load_beir(args.data, args.split)
    if args.limit_queries:
        queries = dict(list(queries.items())[: args.limit_queries])

    qvecs, emb_times = timed_query_vectors(idx, queries)
    results: dict[str, dict] = {}

    def ranked(pairs):
        return [r for r, _ in pairs]

    def hybrid(ret, k: int):
        return lambda q, t: [h.row for h in ret.run(t, k, query_vector=qvecs[q])]

    results["bm25s"] = evaluate("bm25s", lambda q, t: ranked(idx.bm25.search(t, args.depth)), queries, qrels, row_doc)
    if not args.skip_rank_bm25:
        t0 = time.perf_counter()
        params = {k: getattr(idx.bm25, k) for k in ("k1", "b", "stem", "identifiers", "compounds")}
        rb = BM25Index("rank_bm25", **params).build([indexed_text(c) for c in chunks])
        rb_build = time.perf_counter() - t0
        results["rank_bm25"] = evaluate("rank_bm25", lambda q, t: ranked(rb.search(t, args.depth)), queries, qrels, row_doc)
        results["rank_bm25"]["build_s"] = round(rb_build, 2)
    results["dense"] = evaluate("dense", lambda q, t: ranked(idx.dense.search(qvecs[q], args.depth)), queries, qrels, row_doc)
    from ragsieve.agent.config import Config

    default = Config().retrieval  # hybrid_weighted: the default (weighted, the weights chosen on train claims)
    for name, fusion, weights in (
        ("hybrid_rrf", "rrf", (1.0, 1.0)),
        ("hybrid_weighted_equal", "weighted", (1.0, 1.0)),
        ("hybrid_weighted", "weighted", (default.bm25_weight, default.dense_weight)),
    ):
        ret = HybridRetriever(idx, fusion=fusion, rrf_k=60, candidate_k=100, bm25_weight=weights[0], dense_weight=weights[1])
        results[name] = evaluate(name, hybrid(ret, 100), queries, qrels, row_doc)
        top10 = evaluate(name + "@top10", hybrid(ret, 10), queries, qrels, row_doc)
        results[name]["latency_ms_p50_top10"] = top10["latency_ms_p50"]
        results[name]["latency_ms_p95_top10"] = top10["latency_ms_p95"]

    build = report.model_dump()
    if not report.written and args.out.is_file():
        # this run reused the index: keep the build figures of the run that wrote this generation
        before = json.loads(args.out.read_text(encoding="utf-8")).get("index", {})
        if before.get("dir") == str(index_dir) and before.get("build", {}).get("generation") == report.generation:
            build = before["build"]
    from benchmarks.bench_io import header, write

    out = header(measures=["tools/index/", "agent/config/index.py", "tools/metrics.py", "benchmarks/retrieval/main.py"]) | {
        "load_average_at_start": load_at_start,
        "hybrid_weighted": {
            "bm25_weight": default.bm25_weight,
            "dense_weight": default.dense_weight,
            "chosen_on": "SciFact train claims (benchmarks/results/retrieval_methods.json)",
        },
        "dataset": str(args.data),
        "split": args.split,
        "queries": len(queries),
        "index": {
            "dir": str(index_dir),
            "chunks": n,
            "documents": idx.manifest["counts"]["documents"],
            "chunk_tokens": args.chunk_tokens,
            "build": build,
            "build_this_run": report.summary(),
            "embedding_throughput_chunks_per_s": (
                round(build["chunks_embedded"] / build["embed_seconds"], 1) if build.get("embed_seconds") else None
            ),
            "load_average_at_end": os.getloadavg(),
            "manifest": {k: idx.manifest[k] for k in ("embedding", "faiss", "bm25", "index_titles")},
        },
        "query_embedding_ms": {
            "p50": round(float(np.percentile(emb_times, 50)), 3),
            "p95": round(float(np.percentile(emb_times, 95)), 3),
        },
        "methods": results,
        "versions": {
            d: _version(d) for d in ("ragsieve", "bm25s", "rank-bm25", "faiss-cpu", "sentence-transformers", "torch", "numpy")
        },
    }
    write(out, args.out)
    idx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
