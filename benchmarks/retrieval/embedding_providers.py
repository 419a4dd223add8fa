"""Bring-your-own-models benchmark: the same MiniLM local vs behind an OpenAI-compatible endpoint; a reranker.

    .venv/bin/python -m benchmarks.retrieval.main --providers [--scifact-docs 1500 --scifact-queries 100]

Per data set (SciFact test, HotpotQA dev; BEIR layout in ../shared/data), one
index built with the packaged MiniLM through the local `sentence-transformers`
provider and one built with the same model served by an OpenAI-compatible
`/v1/embeddings` server that this benchmark starts on 127.0.0.1 (FastAPI +
uvicorn in a thread, a bounded number of requests, stopped at the end), reached
through the `openai` provider. Reported: nDCG@10 (dense and the default hybrid)
for both on the same questions — they must agree within ±0.002 — and the
endpoint path's embedding throughput relative to local (chunks/s while building,
query embedding latency). SciFact is a sample (`--scifact-docs` documents: every
gold document of `--scifact-queries` questions plus seeded random others);
HotpotQA is whole. With a cross-encoder folder (or hub name) in
RAGSIEVE_BENCH_RERANKER, `fast+rerank` (the rerank step's provider over the
20-hit pool) vs `fast` nDCG@10 on the local index; otherwise that part says it
was skipped.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import socket
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.retrieval.query_docs import timed_query_vectors, to_docs  # shared with main.py, which runs this module
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.metrics import ndcg_at_k

AGREEMENT = 0.002
POOL = 20


# Both paths run the model with the same numerics, so any difference is the provider's: the endpoint serves
# MiniLM through PyTorch, and the local build is pinned to it (the default for new indexes, onnx-int8, gives
# cosine >= 0.990 vectors, not identical ones: scale_encoder_sets.json measures that choice).
ENCODER = "torch"


class EmbeddingsServer:
    """MiniLM behind POST /v1/embeddings on 127.0.0.1 (a free port); at most `max_requests`, then 503; `close()`."""

    def __init__(self, max_requests: int = 20_000, max_s: float = 3600.0):
        import uvicorn
        from fastapi import FastAPI, HTTPException

        model = Embedder(encoder=ENCODER)
        served = {"n": 0}
        app = FastAPI()

        @app.post("/v1/embeddings")
        def embeddings(body: dict) -> dict:
            served["n"] += 1
            if served["n"] > max_requests:
                raise HTTPException(503, "request bound reached")
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = model.embed(texts)
            return {
                "object": "list",
                "model": body.get("model"),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
                "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            }

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        self.timer = threading.Timer(max_s, self.close)  # stops by itself
        self.timer.daemon = True
        self.timer.start()
        while not self.server.started:
            time.sleep(0.05)

    def close(self) -> None:
        self.server.should_exit = True
        self.timer.cancel()
        self.thread.join(timeout=10)
        self.sock.close()


def _read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sample(data: Path, split: str, n_docs: int | None, n_queries: int | None, seed: int, work: Path):
    """(corpus file, queries, qrels): the whole set, or gold documents of `n_queries` questions plus random others."""
    from ragsieve.tools.datasets.beir import read_qrels, read_queries

    corpus = data / "corpus.jsonl.gz" if (data / "corpus.jsonl.gz").is_file() else data / "corpus.jsonl"
    qrels = read_qrels(data / "qrels" / f"{split}.tsv")
    queries = {q: t for q, t in read_queries(data / "queries.jsonl").items() if q in qrels}
    rng = random.Random(seed)
    if n_queries and n_queries < len(queries):
        queries = {q: queries[q] for q in sorted(rng.sample(sorted(queries), n_queries))}
    qrels = {q: qrels[q] for q in queries}
    if not n_docs:
        return corpus, queries, qrels
    docs = _read_jsonl(corpus)
    gold = {d for rel in qrels.values() for d, s in rel.items() if s > 0}
    others = [d for d in docs if d["_id"] not in gold]
    keep = [d for d in docs if d["_id"] in gold] + rng.sample(others, max(0, min(len(others), n_docs - len(gold))))
    path = work / f"{data.name}-sample.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in keep), encoding="utf-8")
    return path, queries, qrels


def evaluate(index_dir: Path, queries, qrels, reranker=None) -> dict:
    idx = HybridIndex.open(index_dir)
    row_doc = [c.doc_id for c in idx.store.get_many(range(len(idx)))]
    qvecs, times = timed_query_vectors(idx, queries)
    hybrid = HybridRetriever(idx, fusion="weighted")
    scores = {"dense": [], "hybrid": [], "hybrid+rerank": []}
    for qid, text in queries.items():
        scores["dense"].append(ndcg_at_k(to_docs([r for r, _ in idx.dense.search(qvecs[qid], 100)], row_doc), qrels[qid]))
        hits = hybrid.run(text, 100, query_vector=qvecs[qid])
        scores["hybrid"].append(ndcg_at_k(to_docs([h.row for h in hits], row_doc), qrels[qid]))
        if reranker is not None:
            head = reranker.run(text, hits[:POOL]).hits
            scores["hybrid+rerank"].append(ndcg_at_k(to_docs([h.row for h in head + hits[POOL:]], row_doc), qrels[qid]))
    out = {f"ndcg@10_{k}": round(float(np.mean(v)), 4) for k, v in scores.items() if v}
    out["ndcg@10_per_query_hybrid"] = scores["hybrid"]
    out["query_embedding_ms_p50"] = round(float(np.percentile(times, 50)), 2)
    out["manifest_embedding"] = idx.manifest["embedding"]
    idx.close()
    return out


def run_dataset(
    name: str, data: Path, split: str, n_docs, n_queries, seed: int, server: EmbeddingsServer, work: Path, reranker
) -> dict:
    corpus, queries, qrels = sample(data, split, n_docs, n_queries, seed, work)
    res: dict = {
        "data": str(data),
        "split": split,
        "questions": len(queries),
        "corpus": str(corpus.name),
        "sample": bool(n_docs or n_queries),
    }
    builds = {}
    for path, embedder in (
        ("local", None),
        ("endpoint", OpenAIEmbedder(server.base_url, "all-MiniLM-L6-v2", batch_size=64, max_input_tokens=None)),
    ):
        folder = work / f"{name}-{path}"
        report = IndexBuilder(
            folder, chunk_tokens=512, embedder=embedder, progress=False, encoder=ENCODER if embedder is None else None
        ).build([corpus])
        builds[path] = {
            "chunks_embedded": report.chunks_embedded,
            "embed_seconds": report.embed_seconds,
            "chunks_per_s": round(report.chunks_embedded / max(report.embed_seconds, 1e-9), 1),
            "documents": report.docs_added,
        }
        res[path] = evaluate(folder, queries, qrels, reranker if path == "local" else None) | {"build": builds[path]}
        print(
            f"{name} {path}: { ({k: v for k, v in res[path].items() if k.startswith('ndcg@10_') and 'per' not in k}) }",
            flush=True,
        )
    a, b = res["local"], res["endpoint"]
    res["agreement"] = {k: round(abs(a[k] - b[k]), 5) for k in ("ndcg@10_dense", "ndcg@10_hybrid")}
    res["agree_within_0.002"] = all(v <= AGREEMENT for v in res["agreement"].values())
    res["endpoint_throughput_vs_local"] = round(builds["endpoint"]["chunks_per_s"] / builds["local"]["chunks_per_s"], 3)
    res["endpoint_query_latency_vs_local"] = round(b["query_embedding_ms_p50"] / max(a["query_embedding_ms_p50"], 1e-9), 2)
    for side in (a, b):
        side.pop("ndcg@10_per_query_hybrid")
    return res


def main(args) -> dict:
    """Called by `benchmarks/retrieval/main.py --providers`; returns the result dict."""
    from ragsieve.tools.rerankers import open_reranker

    shared = Path(args.shared)
    folder = os.environ.get("RAGSIEVE_BENCH_RERANKER")
    reranker, rerank_note = (
        None,
        (
            "skipped: set RAGSIEVE_BENCH_RERANKER to a cross-encoder folder (or a cached hub "
            "name) to compare fast+rerank with fast"
        ),
    )
    if folder:
        reranker = open_reranker("cross-encoder", folder)
        rerank_note = f"ran: {reranker.description}, pool {POOL}"
    server = EmbeddingsServer()
    try:
        with tempfile.TemporaryDirectory(prefix="ragsieve-byom-") as tmp:
            work = Path(tmp)
            sets = {
                "scifact": run_dataset(
                    "scifact",
                    shared / "scifact",
                    "test",
                    args.scifact_docs,
                    args.scifact_queries,
                    args.seed,
                    server,
                    work,
                    reranker,
                ),
                "hotpotqa": run_dataset("hotpotqa", shared / "hotpotqa", "test", None, None, args.seed, server, work, reranker),
            }
    finally:
        server.close()
    return {
        "datasets": sets,
        "rerank": rerank_note,
        "endpoint": "FastAPI + uvicorn on 127.0.0.1 serving the packaged "
        "MiniLM (sentence-transformers) as /v1/embeddings; client: ragsieve's openai provider, batch 64",
        "target": f"|nDCG@10 local - endpoint| <= {AGREEMENT}",
    }
