"""Scale benchmark parts on SciFact: local vs milvus-lite parity, and retrieval quality per encoder.

Used by benchmarks/scale/main.py (see its docstring for the command).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_io import SCIFACT
from benchmarks.bench_io import percentile as pct


def ndcg_recall(ranked_docs: list[str], qrels: dict[str, float]) -> tuple[float, float]:
    dcg = sum((2 ** qrels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked_docs[:10]))
    ideal = sorted(qrels.values(), reverse=True)[:10]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    relevant = {d for d, g in qrels.items() if g > 0}
    recall = len(relevant & set(ranked_docs[:100])) / len(relevant) if relevant else 0.0
    return (dcg / idcg if idcg else 0.0), recall


def dense_and_hybrid_ndcg(index, queries: dict, qrels: dict, qids: list[str]) -> dict:
    """Document nDCG@10 (a document scores as its best chunk) of the default hybrid retrieval (weighted, fused
    here) and of dense alone, top 100, over `qids`: {"hybrid_ndcg@10": ..., "dense_ndcg@10": ...}."""
    from ragsieve.tools.index.query.retriever import HybridRetriever

    out = {}
    for mode, weights in (("hybrid", (1.0, 1.0)), ("dense", (0.0, 1.0))):
        retriever = HybridRetriever(index, fusion="weighted", candidate_k=100)
        scores = [
            ndcg_recall(
                list(dict.fromkeys(h.chunk.doc_id for h in retriever.run(queries[q], top_k=100, weights=weights))), qrels[q]
            )[0]
            for q in qids
        ]
        out[f"{mode}_ndcg@10"] = round(float(np.mean(scores)), 4)
    return out


def parity(index_dir: Path, work: Path, limit: int | None = None) -> dict:
    """Parity twice: the index as built (BM25 k1 0.9, b 0.4, which milvus-lite ignores: it scores with
    k1 1.5, b 0.75), and the same index with its BM25 re-fit at milvus-lite's values (vectors untouched):
    the second isolates what the backend changes from what milvus-lite's fixed BM25 parameters change."""
    from ragsieve.tools.index.milvus.schema import MILVUS_LITE_BM25

    out = {"as_built": parity_once(index_dir, work / "as-built", limit)}
    matched = work / "bm25-matched-src"
    shutil.copytree(index_dir, matched, ignore=shutil.ignore_patterns("milvus.*", "crawl"))
    refit_bm25(matched, *MILVUS_LITE_BM25)
    out["bm25_as_milvus_lite"] = parity_once(matched, work / "bm25-matched", limit)
    out["hybrid_ndcg_difference"] = out["bm25_as_milvus_lite"]["hybrid_ndcg_difference"]
    out["hybrid_ndcg_difference_as_built"] = out["as_built"]["hybrid_ndcg_difference"]
    return out


def refit_bm25(index_dir: Path, k1: float, b: float) -> None:
    """Re-fit the live generation's BM25 with other k1 / b (same analysed text; vectors untouched)."""
    from ragsieve.tools.index.building.report import indexed_text
    from ragsieve.tools.index.local.generations import MANIFEST, current_generation
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.search.bm25 import BM25Index

    with HybridIndex.open(index_dir) as index:
        m = index.manifest
        headers = m.get("settings", {}).get("chunking", {}).get("symbol_headers", True)
        chunks = index.store.get_many(range(len(index)))
        words = m.get("settings", {}).get("chunking", {}).get("header_words", False)
        texts = [indexed_text(c, headers, words) if m.get("index_titles", True) else c.text for c in chunks]
    gen = current_generation(index_dir)
    shutil.rmtree(gen / "bm25")
    bm25 = BM25Index(
        m["bm25"]["engine"],
        k1=k1,
        b=b,
        stem=m["bm25"]["stem"],
        identifiers=m["bm25"].get("identifiers", False),
        compounds=m["bm25"].get("compounds", False),
    ).build(texts)
    bm25.save(gen / "bm25")
    m["bm25"] = m["settings"]["bm25"] = bm25.params
    (gen / MANIFEST).write_text(json.dumps(m, indent=2), encoding="utf-8")


def parity_once(index_dir: Path, work: Path, limit: int | None = None) -> dict:
    from ragsieve.tools.datasets.beir import read_qrels, read_queries
    from ragsieve.tools.index.engines.open import open_index
    from ragsieve.tools.index.milvus.publish import publish
    from ragsieve.tools.index.query.retriever import HybridRetriever

    work.mkdir(parents=True, exist_ok=True)
    copy = work / "scifact"
    shutil.copytree(index_dir, copy, ignore=shutil.ignore_patterns("milvus.*", "crawl"))
    started = time.perf_counter()
    publish(copy, uri=str(work / "scifact-milvus.db"))
    publish_s = time.perf_counter() - started
    queries, qrels = read_queries(SCIFACT / "queries.jsonl"), read_qrels(SCIFACT / "qrels" / "test.tsv")
    qids = [q for q in qrels if q in queries][:limit]  # the first `limit` test queries (qrels order) when set
    out = {"queries": len(qids), "publish_s": round(publish_s, 1)}
    local_dir = work / "scifact-local"
    shutil.copytree(index_dir, local_dir, ignore=shutil.ignore_patterns("milvus.*", "crawl"))
    for backend, folder in (("local", local_dir), ("milvus", copy)):
        index = open_index(folder)
        try:
            row = {}
            for mode, fusion, site, weights in MODES:
                if site == "server" and backend == "local":
                    continue  # the local engine has no server-side ranker
                retriever = HybridRetriever(index, fusion=fusion, fusion_site=site, candidate_k=100)
                scores, recalls, times = [], [], []
                for qid in qids:
                    t = time.perf_counter()
                    hits = retriever.run(queries[qid], top_k=100, weights=weights)
                    times.append(time.perf_counter() - t)
                    docs = list(dict.fromkeys(h.chunk.doc_id for h in hits))
                    n, r = ndcg_recall(docs, qrels[qid])
                    scores.append(n)
                    recalls.append(r)
                row[mode] = {
                    "ndcg@10": round(float(np.mean(scores)), 4),
                    "recall@100": round(float(np.mean(recalls)), 4),
                    "query_p50_ms": round(1000 * pct(times, 0.5), 2),
                }
            out[backend] = row
            print(f"  parity {backend}: {json.dumps(row)}", flush=True)
        finally:
            index.close()
    local_rows = out["local"]
    out["differences_vs_local"] = {
        mode: {m: round(abs(row[m] - local_rows[base][m]), 4) for m in ("ndcg@10", "recall@100")}
        for mode, row in out["milvus"].items()
        for base in [SERVER_BASE.get(mode, mode)]
        if base in local_rows
    }
    out["hybrid_ndcg_difference"] = out["differences_vs_local"]["hybrid"]["ndcg@10"]
    out["dense_ndcg_difference"] = out["differences_vs_local"]["dense"]["ndcg@10"]
    return out


SERVER_BASE = {"hybrid-rrf-server": "hybrid-rrf-client", "hybrid-weighted-server": "hybrid"}
# (row name, fusion, fusion site, (bm25, dense) weights): `hybrid` is the default retrieval (weighted min-max,
# fused here); the -server rows are fused by Milvus' rankers (RRF as here; weighted with Milvus' arctan scaling)
MODES = (
    ("hybrid", "weighted", "client", (1.0, 1.0)),
    ("dense", "weighted", "client", (0.0, 1.0)),
    ("bm25", "weighted", "client", (1.0, 0.0)),
    ("hybrid-rrf-client", "rrf", "client", (1.0, 1.0)),
    ("hybrid-rrf-server", "rrf", "server", (1.0, 1.0)),
    ("hybrid-weighted-server", "weighted", "server", (1.0, 1.0)),
)


def encoder_quality(work: Path) -> dict:
    """SciFact (all 5,183 abstracts, 300 test queries) indexed with each encoder: hybrid and dense nDCG@10."""
    from ragsieve.tools.datasets.beir import read_qrels, read_queries
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    queries, qrels = read_queries(SCIFACT / "queries.jsonl"), read_qrels(SCIFACT / "qrels" / "test.tsv")
    qids = [q for q in qrels if q in queries]
    out: dict = {"queries": len(qids)}
    for encoder in ("torch", "onnx", "onnx-int8"):
        folder = work / f"scifact-{encoder}"
        started = time.perf_counter()
        IndexBuilder(folder, progress=False, encoder=encoder).build([SCIFACT / "corpus.jsonl.gz"])
        row = {"build_s": round(time.perf_counter() - started, 1), "load_average": os.getloadavg()[0]}
        with HybridIndex.open(folder) as index:
            row.update(dense_and_hybrid_ndcg(index, queries, qrels, qids))
        out[encoder] = row
        print(f"  encoder quality {encoder}: {json.dumps(row)}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    for encoder in ("onnx", "onnx-int8"):
        out[encoder]["hybrid_ndcg_difference"] = round(abs(out[encoder]["hybrid_ndcg@10"] - out["torch"]["hybrid_ndcg@10"]), 4)
    return out
