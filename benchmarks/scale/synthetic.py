"""Part 4 of scale.py: synthetic corpora (N unit vectors, 384-d, with generated text) built and queried in the
`local` and `milvus` (milvus-lite) backends: build time, disk, RSS growth, hybrid query p50/p95 at top-10 and
recall@10 of the ANN dense index against exact search."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_io import percentile as pct


def rss_mb() -> float:
    """Resident memory now (not the peak: a peak reached by an earlier part would hide the growth)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


NOISE = 0.6  # norm of the noise added to a real vector: a copy keeps cosine ~0.86 to its source


def synthetic(n: int, dim: int, seed: int = 0, base: np.ndarray | None = None):
    """n unit vectors and generated texts. With `base` (real embeddings), vector i is base[i % len(base)] plus
    isotropic noise of norm NOISE, renormalised: the clustered geometry of real text, unlike random vectors
    (on which HNSW recall is at its worst)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(20000)]
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    if base is not None:
        vectors *= NOISE / np.sqrt(dim)
        for start in range(0, n, 100_000):
            rows = np.arange(start, min(n, start + 100_000))
            vectors[rows] += base[rows % len(base)]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lengths = rng.integers(8, 40, n)
    words = rng.zipf(1.3, int(lengths.sum())) % len(vocab)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[w] for w in words[at : at + length]))
        at += length
    return vectors, texts


def scale_local(n: int, vectors, texts, queries, qvecs, work: Path) -> dict:
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.local.store import ChunkStore
    from ragsieve.tools.index.search.bm25 import BM25Index
    from ragsieve.tools.index.search.dense import DenseIndex
    from ragsieve.tools.types import Chunk

    folder = work / f"local-{n}"
    folder.mkdir()
    rss0, started = rss_mb(), time.perf_counter()
    store = ChunkStore(folder / "chunks.sqlite")
    for start in range(0, n, 10000):
        for i in range(start, min(n, start + 10000)):
            store.add_document(f"d{i}", f"d{i}", "", [Chunk(doc_id=f"d{i}", chunk_index=0, text=texts[i], source=f"d{i}")])
        store.commit()
    bm25 = BM25Index().build(texts)
    bm25.save(folder / "bm25")
    dense = DenseIndex("hnsw", hnsw_m=32, ef_search=128).build(vectors)
    dense.save(folder)
    build_s = time.perf_counter() - started
    index = HybridIndex(folder, folder, {"embedding": {"model": "synthetic"}}, store, bm25, dense, [])
    row = measure(index, queries, qvecs, vectors)
    store.close()
    return {
        "build_s": round(build_s, 1),
        "disk_mb": round(disk_mb(folder), 1),
        "rss_growth_mb": round(rss_mb() - rss0, 1),
        **row,
        "ann": "FAISS HNSW M=32 efSearch=128",
    }


def measure(index, queries, qvecs, vectors, fusion_site: str = "client") -> dict:
    """Hybrid top-10 latency through the real retriever, and the ANN index's recall@10 against exact search."""
    from ragsieve.tools.index.query.retriever import HybridRetriever

    retriever = HybridRetriever(index, fusion="rrf", candidate_k=100, fusion_site=fusion_site)
    times, recalls = [], []
    for q, qv in zip(queries, qvecs):
        t = time.perf_counter()
        retriever.run(q, top_k=10, query_vector=qv)
        times.append(time.perf_counter() - t)
        exact = set(np.argsort(-(vectors @ qv))[:10].tolist())
        recalls.append(len(exact & {r for r, _ in index.dense.search(qv, 10)}) / 10)
    return {
        "hybrid_p50_ms": round(1000 * pct(times, 0.5), 2),
        "hybrid_p95_ms": round(1000 * pct(times, 0.95), 2),
        "ann_recall@10": round(float(np.mean(recalls)), 4),
    }


def scale_milvus(n: int, vectors, texts, queries, qvecs, work: Path) -> dict:
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus.schema import analysed, create_collection
    from ragsieve.tools.index.milvus.search import MilvusBM25, MilvusDense
    from ragsieve.tools.index.milvus.store import MilvusStore, MilvusVectors

    uri = str(work / f"milvus-{n}.db")
    client = MilvusClient(uri)
    rss0, started = rss_mb(), time.perf_counter()
    create_collection(client, "synthetic", vectors.shape[1], "HNSW")
    for start in range(0, n, 5000):
        client.insert(
            "synthetic",
            [
                {
                    "pk": i,
                    "row": i,
                    "born": 0,
                    "died": 2**62,
                    "doc_id": f"d{i}",
                    "chunk_index": 0,
                    "text": texts[i],
                    "search_text": analysed(texts[i], True),
                    "source": f"d{i}",
                    "title": "",
                    "kind": "text",
                    "symbol": "",
                    "line_start": -1,
                    "line_end": -1,
                    "text_hash": "",
                    "doc_hash": "",
                    "tenant": "default",
                    "dense": vectors[i].tolist(),
                }
                for i in range(start, min(n, start + 5000))
            ],
        )
    client.flush("synthetic")  # sealed segments get their HNSW / inverted indexes (as `publish` does)
    client.load_collection("synthetic")
    build_s = time.perf_counter() - started

    from ragsieve.tools.index.milvus.index import MilvusIndex

    class Synthetic:  # the backend surface the retriever uses
        bm25, dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
        store, vectors_ = MilvusStore(client, "synthetic", n), None
        hybrid_search = MilvusIndex.hybrid_search  # Milvus' own RRF over its BM25 and dense searches
        symbols = None  # no symbol table: synthetic texts name no API

        def __len__(self):
            return n

    index = Synthetic()
    index.client, index.pointer = client, {"collection": "synthetic"}
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    row = measure(index, queries, qvecs, vectors, fusion_site="client")
    server = measure(index, queries, qvecs, vectors, fusion_site="server")
    row.update(
        {
            "hybrid_server_p50_ms": server["hybrid_p50_ms"],
            "hybrid_server_p95_ms": server["hybrid_p95_ms"],
            "fusion": "hybrid_*: client-side RRF over Milvus BM25 + dense; hybrid_server_*: Milvus hybrid_search",
        }
    )
    client.close()
    db = Path(uri)
    return {
        "build_s": round(build_s, 1),
        "disk_mb": round(db.stat().st_size / 1e6 if db.is_file() else disk_mb(db), 1),
        "rss_growth_mb": round(rss_mb() - rss0, 1),
        **row,
        "ann": "Milvus HNSW M=32 efConstruction=200",
    }
