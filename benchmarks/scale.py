"""Scale benchmark -> benchmarks/results/scale.json: backend parity on SciFact, encoder throughput, and
synthetic corpora of 100k (and 1M) chunks in the `local` and `milvus` (milvus-lite) backends.

    nice -n 5 .venv/bin/python benchmarks/scale.py [--sizes 100000,1000000] [--scifact-index DIR]

1. Parity (scale_parity.py): SciFact (BEIR test split) retrieved with the same vectors from the local index
   and from the same index published to milvus-lite: nDCG@10 and Recall@100 (documents) for hybrid (fused
   here, and fused by Milvus' RRF / weighted rankers), dense and BM25; once as built, once with the local
   BM25 re-fit at milvus-lite's fixed k1 = 1.5, b = 0.75.
2. Encoders: docs/s on 1,000 SciFact abstracts for torch, onnx and onnx-int8 in one run, with each path's
   cosine agreement to torch and the load average; then (encoder-quality) the whole of SciFact indexed with
   each encoder and its hybrid / dense nDCG@10.
3. Build: the same 1,000 abstracts indexed with BM25 built while encoding and after it (alternated twice).
5. Issue 28 (scale_publish.py): publish time of a one-document change at 10k/100k(/1M) chunks on local and
   milvus-lite (synthetic vectors), index chunks per CPU-second default encoder vs torch (interleaved), and
   Ray throughput with 1 and 2 encoder actors with the N-node arithmetic.
4. Scale: N random unit vectors (384-d) with generated text (the encoder is not what is measured): build
   time, disk, RSS growth, hybrid query p50/p95 at top-10, and recall@10 of the ANN dense index (FAISS HNSW /
   Milvus HNSW) against exact search.
Any OpenAI-compatible endpoint is irrelevant here: no LLM is called.
"""
from __future__ import annotations

import argparse
import gzip
import json
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
import scale_parity  # noqa: E402
from scale_parity import pct  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def rss_mb() -> float:
    """Resident memory now (not the peak: a peak reached by an earlier part would hide the growth)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def encoders(n_docs: int) -> dict:
    from ragsieve.tools.index.embedders.local_embedder import Embedder

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
        texts.append(" ".join(vocab[w] for w in words[at:at + length]))
        at += length
    return vectors, texts


def scale_local(n: int, vectors, texts, queries, qvecs, work: Path) -> dict:
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.local.store import ChunkStore
    from ragsieve.tools.index.query.bm25 import BM25Index
    from ragsieve.tools.index.query.dense import DenseIndex
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


def build_overlap(n_docs: int, work: Path) -> dict:
    """Index build of `n_docs` SciFact abstracts with BM25 overlapped with encoding, and without (torch)."""
    from ragsieve.tools.index.building.builder import IndexBuilder

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
    return {"hybrid_p50_ms": round(1000 * pct(times, 0.5), 2), "hybrid_p95_ms": round(1000 * pct(times, 0.95), 2),
            "ann_recall@10": round(float(np.mean(recalls)), 4)}


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
        client.insert("synthetic", [{"pk": i, "row": i, "born": 0, "died": 2 ** 62, "doc_id": f"d{i}",
                                     "chunk_index": 0, "text": texts[i],
                                     "search_text": analysed(texts[i], True), "source": f"d{i}", "title": "", "kind": "text",
                                     "symbol": "", "line_start": -1, "line_end": -1, "text_hash": "", "doc_hash": "",
                                     "tenant": "default", "dense": vectors[i].tolist()}
                                    for i in range(start, min(n, start + 5000))])
    client.flush("synthetic")  # sealed segments get their HNSW / inverted indexes (as `publish` does)
    client.load_collection("synthetic")
    build_s = time.perf_counter() - started

    from ragsieve.tools.index.milvus.index import MilvusIndex

    class Synthetic:  # the backend surface the retriever uses
        bm25, dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
        store, vectors_ = MilvusStore(client, "synthetic", n), None
        hybrid_search = MilvusIndex.hybrid_search  # Milvus' own RRF over its BM25 and dense searches

        def __len__(self):
            return n

    index = Synthetic()
    index.client, index.pointer = client, {"collection": "synthetic"}
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    row = measure(index, queries, qvecs, vectors, fusion_site="client")
    server = measure(index, queries, qvecs, vectors, fusion_site="server")
    row.update({"hybrid_server_p50_ms": server["hybrid_p50_ms"], "hybrid_server_p95_ms": server["hybrid_p95_ms"],
                "fusion": "hybrid_*: client-side RRF over Milvus BM25 + dense; hybrid_server_*: Milvus hybrid_search"})
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
    ap.add_argument("--skip", default="", help="comma list of parts to skip: parity,encoders,encoder-quality,build,scale,"
                                               "publish,index-cpu,ray")
    ap.add_argument("--publish-sizes", default="10000,100000", help="publish part: chunks (1000000 if time allows)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-scale-cache",
                    help="publish part: where the synthetic indexes are kept between runs")
    ap.add_argument("--cpu-docs", type=int, default=300, help="index-cpu and ray parts: SciFact abstracts")
    ap.add_argument("--parity-queries", type=int, help="the first N SciFact test queries only (default: all 300)")
    ap.add_argument("--vectors", choices=["real", "random"], default="real",
                    help="scale part: real SciFact vectors with noise (needs --scifact-index) or random unit vectors")
    ap.add_argument("--milvus-sizes", help="sizes also run in milvus-lite (default: all of --sizes)")
    ap.add_argument("--milvus-queries", type=int, help="queries timed in milvus-lite (default: --queries)")
    ap.add_argument("--merge", action="store_true", help="update --out: parts not run keep their earlier results")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    skip = set(filter(None, args.skip.split(",")))
    result = {**bench_io.header()}
    if args.merge and args.out.is_file():  # keep the parts not run this time (their own headers stay inside)
        previous = json.loads(args.out.read_text(encoding="utf-8"))
        earlier = dict(previous.pop("earlier_parts", {}))
        for part in set(previous) - set(result) - {"load_average_at_end"}:
            earlier.setdefault(part, previous.get("command"))
        result = {**previous, **result, "earlier_parts": earlier}  # part -> the command that produced it
    work = Path(tempfile.mkdtemp(prefix="ragsieve-scale-"))
    try:
        if "parity" not in skip:
            index_dir = args.scifact_index
            if index_dir is None:
                from ragsieve.tools.index.building.builder import IndexBuilder

                index_dir = work / "scifact-built"
                IndexBuilder(index_dir, progress=False).build([SCIFACT / "corpus.jsonl.gz"])
            result["parity"] = scale_parity.parity(index_dir, work, args.parity_queries)
            result.get("earlier_parts", {}).pop("parity", None)
            bench_io.write(dict(result), args.out)  # each part is kept even if a later one is stopped
        if "encoders" not in skip:
            result["encoders"] = encoders(args.encoder_docs)
            result.get("earlier_parts", {}).pop("encoders", None)
            bench_io.write(dict(result), args.out)
        if "encoder-quality" not in skip:
            result["encoder_quality"] = scale_parity.encoder_quality(work)
            result.get("earlier_parts", {}).pop("encoder_quality", None)
            bench_io.write(dict(result), args.out)
        if "build" not in skip:
            result["build_overlap"] = build_overlap(args.encoder_docs, work)
            result.get("earlier_parts", {}).pop("build_overlap", None)
            bench_io.write(dict(result), args.out)
        import scale_publish

        result["commit"] = scale_publish.commit()
        if "publish" not in skip:
            result["publish_one_change"] = dict(result.get("publish_one_change", {}))
            result["publish_one_change"]["vectors"] = "synthetic (sha256 of the text): the encoder is not measured"
            for n in [int(x) for x in args.publish_sizes.split(",") if x]:
                result["publish_one_change"][str(n)] = scale_publish.publish_change(n, args.cache)
                print(f"  publish {n}: {json.dumps(result['publish_one_change'][str(n)])}", flush=True)
                bench_io.write(dict(result), args.out)
        if "index-cpu" not in skip:
            result["index_chunks_per_cpu_s"] = scale_publish.index_cpu(args.cpu_docs, work)
            bench_io.write(dict(result), args.out)
        if "ray" not in skip:
            result["ray"] = scale_publish.ray_throughput(args.cpu_docs, work)
            bench_io.write(dict(result), args.out)
        if "scale" not in skip:
            result["scale"] = dict(result.get("scale", {}))
            result.get("earlier_parts", {}).pop("scale", None)  # sizes not run now keep their numbers
            base = None
            if args.scifact_index is not None and args.vectors == "real":
                from ragsieve.tools.index.local.index import HybridIndex

                with HybridIndex.open(args.scifact_index) as scifact:
                    base = np.asarray(scifact.vectors, dtype=np.float32)
            sizes = [int(x) for x in args.sizes.split(",")]
            milvus_sizes = sizes if args.milvus_sizes is None else [int(x) for x in args.milvus_sizes.split(",") if x]
            if set(milvus_sizes) - set(sizes):
                ap.error(f"--milvus-sizes {sorted(set(milvus_sizes) - set(sizes))} are not in --sizes")
            for n in sizes:
                vectors, texts = synthetic(n, 384, base=base)
                rng = np.random.default_rng(1)
                picks = rng.choice(n, args.queries, replace=False)
                queries = [" ".join(texts[i].split()[:4]) for i in picks]
                qvecs = [vectors[i] * 0.8 + 0.2 * rng.standard_normal(384).astype(np.float32) for i in picks]
                qvecs = [v / np.linalg.norm(v) for v in qvecs]
                row = {"local": scale_local(n, vectors, texts, queries, qvecs, work), "queries": len(queries)}
                print(f"  scale {n} local: {json.dumps(row['local'])}", flush=True)
                if n in milvus_sizes:
                    m = args.milvus_queries or args.queries
                    row["milvus-lite"] = scale_milvus(n, vectors, texts, queries[:m], qvecs[:m], work)
                    row["milvus-lite"]["queries"] = min(m, len(queries))
                else:
                    row["milvus-lite"] = {"skipped": "not in --milvus-sizes"}
                print(f"  scale {n} milvus-lite: {json.dumps(row['milvus-lite'])}", flush=True)
                row["command"] = result["command"]
                row["vectors"] = (f"SciFact MiniLM vectors ({len(base)}) + noise of norm {NOISE}" if base is not None
                                  else "random unit vectors")
                result["scale"][str(n)] = row
                bench_io.write(dict(result), args.out)
                for p in work.glob(f"*-{n}*"):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
