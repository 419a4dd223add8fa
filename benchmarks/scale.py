"""Scale benchmark -> benchmarks/results/scale.json: backend parity on SciFact, encoder throughput, and
synthetic corpora of 100k (and 1M) chunks in the `local` and `milvus` (milvus-lite) backends.

    nice -n 5 .venv/bin/python benchmarks/scale.py [--sizes 100000,1000000] [--scifact-index DIR]

1. Parity: SciFact (BEIR test split, 300 queries) retrieved with the same vectors from the local index and
   from the same index published to milvus-lite: nDCG@10 and Recall@100 (documents), hybrid, dense and BM25.
2. Encoders: docs/s on 1,000 SciFact abstracts for torch, onnx and onnx-int8 in one run, with each path's
   cosine agreement to torch and the load average.
3. Scale: N random unit vectors (384-d) with generated text (the encoder is not what is measured): build
   time, disk, RSS growth, hybrid query p50/p95 at top-10, and recall@10 of the ANN dense index (FAISS HNSW /
   Milvus HNSW) against exact search.
Any OpenAI-compatible endpoint is irrelevant here: no LLM is called.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_io  # noqa: E402

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else None


def ndcg_recall(ranked_docs: list[str], qrels: dict[str, float]) -> tuple[float, float]:
    dcg = sum((2 ** qrels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked_docs[:10]))
    ideal = sorted(qrels.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    relevant = {d for d, g in qrels.items() if g > 0}
    recall = len(relevant & set(ranked_docs[:100])) / len(relevant) if relevant else 0.0
    return (dcg / idcg if idcg else 0.0), recall


def parity(index_dir: Path, work: Path, limit: int | None = None) -> dict:
    from ragsieve.agent.eval.beir import read_qrels, read_queries
    from ragsieve.tools.index.backend import open_index
    from ragsieve.tools.index.milvus_publish import publish
    from ragsieve.tools.index.retriever import HybridRetriever

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
                row[mode] = {"ndcg@10": round(float(np.mean(scores)), 4), "recall@100": round(float(np.mean(recalls)), 4),
                             "query_p50_ms": round(1000 * pct(times, 0.5), 2)}
            out[backend] = row
            print(f"  parity {backend}: {json.dumps(row)}", flush=True)
        finally:
            index.close()
    local_rows = out["local"]
    out["differences_vs_local"] = {
        mode: {m: round(abs(row[m] - local_rows[base][m]), 4) for m in ("ndcg@10", "recall@100")}
        for mode, row in out["milvus"].items()
        for base in [SERVER_BASE.get(mode, mode)] if base in local_rows}
    out["hybrid_ndcg_difference"] = out["differences_vs_local"]["hybrid"]["ndcg@10"]
    out["dense_ndcg_difference"] = out["differences_vs_local"]["dense"]["ndcg@10"]
    return out


SERVER_BASE = {"hybrid-rrf-server": "hybrid-rrf-client", "hybrid-weighted-server": "hybrid"}
# (row name, fusion, fusion site, (bm25, dense) weights): `hybrid` is the default retrieval (weighted min-max,
# fused here); the -server rows are fused by Milvus' rankers (RRF as here; weighted with Milvus' arctan scaling)
MODES = (("hybrid", "weighted", "client", (1.0, 1.0)), ("dense", "weighted", "client", (0.0, 1.0)),
         ("bm25", "weighted", "client", (1.0, 0.0)), ("hybrid-rrf-client", "rrf", "client", (1.0, 1.0)),
         ("hybrid-rrf-server", "rrf", "server", (1.0, 1.0)), ("hybrid-weighted-server", "weighted", "server", (1.0, 1.0)))


def encoders(n_docs: int) -> dict:
    from ragsieve.tools.index.dense import Embedder

    texts = []
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line, _ in zip(fh, range(n_docs)):
            d = json.loads(line)
            texts.append(f"{d['title']}\n{d['text']}")
    out, reference = {"docs": len(texts), "load_average_before": os.getloadavg()}, None
    for encoder in ("torch", "onnx", "onnx-int8"):
        model = Embedder(encoder=encoder)
        model.embed(texts[:16])  # warm-up
        started = time.perf_counter()
        vectors = model.embed(texts)
        seconds = time.perf_counter() - started
        row = {"docs_per_s": round(len(texts) / seconds, 2), "seconds": round(seconds, 1),
               "load_average": os.getloadavg()[0]}
        if reference is None:
            reference = vectors
        else:
            cos = (reference * vectors).sum(1)
            row.update(cosine_min=round(float(cos.min()), 5), cosine_mean=round(float(cos.mean()), 5))
        out[encoder] = row
        print(f"  encoder {encoder}: {json.dumps(row)}", flush=True)
    base = out["torch"]["docs_per_s"]
    for encoder in ("onnx", "onnx-int8"):
        out[encoder]["speedup_vs_torch"] = round(out[encoder]["docs_per_s"] / base, 2)
    return out


def synthetic(n: int, dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(20000)]
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lengths = rng.integers(8, 40, n)
    words = rng.zipf(1.3, int(lengths.sum())) % len(vocab)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[w] for w in words[at:at + length]))
        at += length
    return vectors, texts


def scale_local(n: int, vectors, texts, queries, qvecs, work: Path) -> dict:
    from ragsieve.tools.index.bm25 import BM25Index
    from ragsieve.tools.index.dense import DenseIndex
    from ragsieve.tools.index.hybrid import HybridIndex
    from ragsieve.tools.index.store import ChunkStore
    from ragsieve.tools.types import Chunk

    folder = work / f"local-{n}"
    folder.mkdir()
    rss0, started = rss_mb(), time.perf_counter()
    store = ChunkStore(folder / "chunks.sqlite")
    for start in range(0, n, 10000):
        for i in range(start, min(n, start + 10000)):
            store.add_document(f"d{i}", f"d{i}", "", [Chunk(doc_id=f"d{i}", chunk_index=0, text=texts[i],
                                                          source=f"d{i}")])
        store.commit()
    bm25 = BM25Index().build(texts)
    bm25.save(folder / "bm25")
    dense = DenseIndex("hnsw", hnsw_m=32, ef_search=128).build(vectors)
    dense.save(folder)
    build_s = time.perf_counter() - started
    index = HybridIndex(folder, folder, {"embedding": {"model": "synthetic"}}, store, bm25, dense, [])
    row = measure(index, queries, qvecs, vectors)
    store.close()
    return {"build_s": round(build_s, 1), "disk_mb": round(disk_mb(folder), 1),
            "rss_growth_mb": round(rss_mb() - rss0, 1), **row, "ann": "FAISS HNSW M=32 efSearch=128"}


def encoder_quality(work: Path) -> dict:
    """SciFact (all 5,183 abstracts, 300 test queries) indexed with each encoder: hybrid and dense nDCG@10."""
    from ragsieve.agent.eval.beir import read_qrels, read_queries
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.tools.index.hybrid import HybridIndex
    from ragsieve.tools.index.retriever import HybridRetriever

    queries, qrels = read_queries(SCIFACT / "queries.jsonl"), read_qrels(SCIFACT / "qrels" / "test.tsv")
    qids = [q for q in qrels if q in queries]
    out: dict = {"queries": len(qids)}
    for encoder in ("torch", "onnx", "onnx-int8"):
        folder = work / f"scifact-{encoder}"
        started = time.perf_counter()
        IndexBuilder(folder, progress=False, encoder=encoder).build([SCIFACT / "corpus.jsonl.gz"])
        row = {"build_s": round(time.perf_counter() - started, 1), "load_average": os.getloadavg()[0]}
        with HybridIndex.open(folder) as index:
            for mode, weights in (("hybrid", (1.0, 1.0)), ("dense", (0.0, 1.0))):
                retriever = HybridRetriever(index, fusion="weighted", candidate_k=100)
                scores = [ndcg_recall(list(dict.fromkeys(h.chunk.doc_id for h in retriever.run(
                    queries[q], top_k=100, weights=weights))), qrels[q])[0] for q in qids]
                row[f"{mode}_ndcg@10"] = round(float(np.mean(scores)), 4)
        out[encoder] = row
        print(f"  encoder quality {encoder}: {json.dumps(row)}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    for encoder in ("onnx", "onnx-int8"):
        out[encoder]["hybrid_ndcg_difference"] = round(abs(out[encoder]["hybrid_ndcg@10"] - out["torch"]["hybrid_ndcg@10"]), 4)
    return out


def build_overlap(n_docs: int, work: Path) -> dict:
    """Index build of `n_docs` SciFact abstracts with BM25 overlapped with encoding, and without (torch)."""
    from ragsieve.tools.index.builder import IndexBuilder

    source = work / "overlap-corpus.jsonl"
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh, source.open("w") as out_fh:
        for line, _ in zip(fh, range(n_docs)):
            out_fh.write(line)
    out: dict = {"docs": n_docs, "load_average_before": os.getloadavg()}
    for overlap in (False, True, False, True):  # alternated: the machine's load drifts
        folder = work / f"overlap-{overlap}"
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        IndexBuilder(folder, progress=False, overlap=overlap).build([source])
        out.setdefault("overlap" if overlap else "sequential", []).append(round(time.perf_counter() - started, 1))
    out["speedup"] = round(sum(out["sequential"]) / sum(out["overlap"]), 3)
    print(f"  build overlap: {json.dumps(out)}", flush=True)
    return out


def measure(index, queries, qvecs, vectors) -> dict:
    """Hybrid top-10 latency through the real retriever, and the ANN index's recall@10 against exact search."""
    from ragsieve.tools.index.retriever import HybridRetriever

    retriever = HybridRetriever(index, fusion="rrf", candidate_k=100)
    times, recalls = [], []
    for q, qv in zip(queries, qvecs):
        t = time.perf_counter()
        retriever.run(q, top_k=10, query_vector=qv)
        times.append(time.perf_counter() - t)
        exact = set(np.argsort(-(vectors @ qv))[:10].tolist())
        recalls.append(len(exact & {r for r, _ in index.dense.search(qv, 10)}) / 10)
    return {"hybrid_p50_ms": round(1000 * pct(times, 0.5), 2), "hybrid_p95_ms": round(1000 * pct(times, 0.95), 2),
            "ann_recall@10": round(float(np.mean(recalls)), 4)}


def scale_milvus(n: int, vectors, texts, queries, qvecs, work: Path) -> dict:
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus import MilvusBM25, MilvusDense, MilvusStore, MilvusVectors
    from ragsieve.tools.index.milvus_publish import analysed, create_collection

    uri = str(work / f"milvus-{n}.db")
    client = MilvusClient(uri)
    rss0, started = rss_mb(), time.perf_counter()
    create_collection(client, "synthetic", vectors.shape[1], "HNSW")
    for start in range(0, n, 5000):
        client.insert("synthetic", [{"row": i, "doc_id": f"d{i}", "chunk_index": 0, "text": texts[i],
                                     "search_text": analysed(texts[i], True), "source": f"d{i}", "title": "", "kind": "text",
                                     "symbol": "", "line_start": -1, "line_end": -1, "text_hash": "", "doc_hash": "",
                                     "sparse_flag": False, "tenant": "default", "dense": vectors[i].tolist()}
                                    for i in range(start, min(n, start + 5000))])
    client.load_collection("synthetic")
    build_s = time.perf_counter() - started

    class Synthetic:  # the backend surface the retriever uses
        bm25, dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
        store, vectors_ = MilvusStore(client, "synthetic", n), None

        def __len__(self):
            return n

    index = Synthetic()
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    row = measure(index, queries, qvecs, vectors)
    client.close()
    db = Path(uri)
    return {"build_s": round(build_s, 1), "disk_mb": round(db.stat().st_size / 1e6 if db.is_file() else disk_mb(db), 1),
            "rss_growth_mb": round(rss_mb() - rss0, 1), **row, "ann": "Milvus HNSW M=32 efConstruction=200"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--encoder-docs", type=int, default=1000)
    ap.add_argument("--scifact-index", type=Path, help="a built SciFact index (default: built here)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: parity,encoders,encoder-quality,build,scale")
    ap.add_argument("--parity-queries", type=int, help="the first N SciFact test queries only (default: all 300)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    skip = set(filter(None, args.skip.split(",")))
    result = {**bench_io.header()}
    work = Path(tempfile.mkdtemp(prefix="ragsieve-scale-"))
    try:
        if "parity" not in skip:
            index_dir = args.scifact_index
            if index_dir is None:
                from ragsieve.tools.index.builder import IndexBuilder

                index_dir = work / "scifact-built"
                IndexBuilder(index_dir, progress=False).build([SCIFACT / "corpus.jsonl.gz"])
            result["parity"] = parity(index_dir, work, args.parity_queries)
            bench_io.write(dict(result), args.out)  # each part is kept even if a later one is stopped
        if "encoders" not in skip:
            result["encoders"] = encoders(args.encoder_docs)
            bench_io.write(dict(result), args.out)
        if "encoder-quality" not in skip:
            result["encoder_quality"] = encoder_quality(work)
            bench_io.write(dict(result), args.out)
        if "build" not in skip:
            result["build_overlap"] = build_overlap(args.encoder_docs, work)
            bench_io.write(dict(result), args.out)
        if "scale" not in skip:
            result["scale"] = {}
            for n in [int(x) for x in args.sizes.split(",")]:
                vectors, texts = synthetic(n, 384)
                rng = np.random.default_rng(1)
                picks = rng.choice(n, args.queries, replace=False)
                queries = [" ".join(texts[i].split()[:4]) for i in picks]
                qvecs = [vectors[i] * 0.8 + 0.2 * rng.standard_normal(384).astype(np.float32) for i in picks]
                qvecs = [v / np.linalg.norm(v) for v in qvecs]
                row = {"local": scale_local(n, vectors, texts, queries, qvecs, work)}
                print(f"  scale {n} local: {json.dumps(row['local'])}", flush=True)
                row["milvus-lite"] = scale_milvus(n, vectors, texts, queries, qvecs, work)
                print(f"  scale {n} milvus-lite: {json.dumps(row['milvus-lite'])}", flush=True)
                result["scale"][str(n)] = row
                bench_io.write(dict(result), args.out)
                for p in work.glob(f"*-{n}*"):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
