"""Issue 60: the default encoder and fusion side by side in one run -> benchmarks/results/retrieval_encoders.json.

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.encoders [--sets scifact,squad2,hotpotqa]
        [--encoders onnx,onnx-int8] [--work /tmp/retrieval/encoders]

For each set (BEIR layout under ../shared/data, test qrels) and each encoder, alternated within the run (the order
flips from set to set), the whole corpus is indexed by the builder `ragsieve index` runs (`IndexBuilder.build`:
loading, chunking, embedding, BM25, FAISS, the generation write; the model loaded beforehand). Process CPU time
(user + system, all threads) gives chunks per CPU-second, comparable across encoders on a shared machine where
wall time is not; on 2 idle cores a build runs at most 2x that. Then every test query with a qrel is retrieved
as `ragsieve eval --retrieval-only` does (the default `[retrieval]` settings, top `candidate_k`) and, on the same
vectors, with the former 50/50 weights: document nDCG@10 and Recall@100 (a document at its best chunk's place),
each with its standard error over the queries, and the query embedding p50 in ms.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import bench_io

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
DATA = REPO.parent / "shared" / "data"
MEASURES = ["tools/index/", "agent/config/index.py", "tools/metrics.py", "benchmarks/retrieval/encoders.py"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _corpus(folder: Path) -> Path:
    return next(folder / n for n in ("corpus.jsonl.gz", "corpus.jsonl") if (folder / n).is_file())


def _mean_se(values: list[float]) -> tuple[float, float]:
    return round(float(np.mean(values)), 4), round(float(np.std(values) / math.sqrt(len(values))), 4)


def quality(index, queries: dict, qrels: dict, qids: list[str]) -> dict:
    """The default retrieval and the former 50/50 weights on the same vectors, each query embedded once."""
    from ragsieve.agent.config import Config
    from ragsieve.tools.index.query.retriever import HybridRetriever
    from ragsieve.tools.metrics import docs_from_chunks, ndcg_at_k, recall_at_k

    r = Config().retrieval
    retriever = HybridRetriever(
        index,
        fusion=r.fusion,
        rrf_k=r.rrf_k,
        bm25_weight=r.bm25_weight,
        dense_weight=r.dense_weight,
        candidate_k=r.candidate_k,
        fusion_site=r.fusion_site,
        symbols=r.symbols,
        collapse=r.collapse,
        sections=r.sections,
        ranking=r.ranking,
    )
    variants = {"default": None, "equal_weights": (1.0, 1.0)}
    scores: dict[str, dict[str, list[float]]] = {v: {"ndcg": [], "recall": []} for v in variants}
    index.embed_query("warm up")
    embed_ms = []
    for q in qids:
        t0 = time.perf_counter()
        vector = index.embed_query(queries[q])
        embed_ms.append((time.perf_counter() - t0) * 1000)
        for name, weights in variants.items():
            hits = retriever.run(queries[q], top_k=r.candidate_k, weights=weights, query_vector=vector)
            docs = docs_from_chunks(h.chunk_id for h in hits)
            scores[name]["ndcg"].append(ndcg_at_k(docs, qrels[q]))
            scores[name]["recall"].append(recall_at_k(docs, qrels[q], 100))
    out: dict = {
        "settings": {
            "fusion": r.fusion,
            "bm25_weight": r.bm25_weight,
            "dense_weight": r.dense_weight,
            "candidate_k": r.candidate_k,
        },
        "query_embedding_ms_p50": round(float(np.percentile(embed_ms, 50)), 3),
    }
    for name in variants:
        (nd, nd_se), (rc, rc_se) = _mean_se(scores[name]["ndcg"]), _mean_se(scores[name]["recall"])
        out[name] = {"ndcg@10": nd, "ndcg@10_se": nd_se, "recall@100": rc, "recall@100_se": rc_se}
    return out


def run_one(name: str, encoder: str, work: Path, limit: int | None) -> dict:
    from ragsieve.tools.datasets.beir import read_qrels, read_queries
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    folder = DATA / name
    target = work / f"{name}-{encoder}"
    shutil.rmtree(target, ignore_errors=True)
    builder = IndexBuilder(target, encoder=encoder, progress=False)
    builder._embedder_for()  # model load / ONNX session start-up are not indexing
    cpu0, t0 = _cpu(), time.perf_counter()
    report = builder.build([_corpus(folder)])
    cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
    row = {
        "chunks": report.chunks_total,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "chunks_per_cpu_s": round(report.chunks_total / cpu, 3),
        "chunks_per_wall_s": round(report.chunks_total / wall, 3),
        "load_average": os.getloadavg()[0],
    }
    queries, qrels = read_queries(folder / "queries.jsonl"), read_qrels(folder / "qrels" / "test.tsv")
    qids = sorted(q for q in qrels if q in queries)[:limit]
    with HybridIndex.open(target) as index:
        row.update(quality(index, queries, qrels, qids))
    row["queries"] = len(qids)
    shutil.rmtree(target, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="scifact,squad2,hotpotqa")
    ap.add_argument("--encoders", default="onnx,onnx-int8")
    ap.add_argument("--limit-queries", type=int, help="the first N test queries (sorted ids) per set")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-retrieval-encoders")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_encoders.json")
    args = ap.parse_args(argv)
    encoders = args.encoders.split(",")
    result = bench_io.header(measures=MEASURES) | {
        "chosen_on": "the weights: SciFact train claims (benchmarks/results/retrieval_methods.json); every figure "
        "here is on the sets' test qrels",
        "sets": {},
    }
    for i, name in enumerate(args.sets.split(",")):
        order = encoders if i % 2 == 0 else encoders[::-1]
        rows = {}
        for encoder in order:
            rows[encoder] = run_one(name, encoder, args.work, args.limit_queries)
            print(f"{name} {encoder}: {rows[encoder]}", flush=True)
        result["sets"][name] = {"order": order, **rows}
        bench_io.write(result, args.out)  # each set as it finishes
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
