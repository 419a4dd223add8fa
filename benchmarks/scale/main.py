"""Scale benchmark -> benchmarks/results/scale.json: backend parity on SciFact, encoder throughput, and
synthetic corpora of 100k (and 1M) chunks in the `local` and `milvus` (milvus-lite) backends.

    nice -n 5 .venv/bin/python -m benchmarks.scale.main [--sizes 100000,1000000] [--scifact-index DIR]

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
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import bench_io  # noqa: E402
from benchmarks.scale import parity as scale_parity  # noqa: E402
from benchmarks.scale.encoders import build_overlap, encoders  # noqa: E402
from benchmarks.scale.synthetic import NOISE, scale_local, scale_milvus, synthetic  # noqa: E402  (access.py: from scale)

SCIFACT = bench_io.SCIFACT


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--encoder-docs", type=int, default=1000)
    ap.add_argument("--scifact-index", type=Path, help="a built SciFact index (default: built here)")
    ap.add_argument(
        "--skip",
        default="",
        help="comma list of parts to skip: parity,encoders,encoder-quality,build,scale,publish,index-cpu,ray",
    )
    ap.add_argument("--publish-sizes", default="10000,100000", help="publish part: chunks (1000000 if time allows)")
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ragsieve-scale-cache",
        help="publish part: where the synthetic indexes are kept between runs",
    )
    ap.add_argument("--cpu-docs", type=int, default=300, help="index-cpu and ray parts: SciFact abstracts")
    ap.add_argument("--parity-queries", type=int, help="the first N SciFact test queries only (default: all 300)")
    ap.add_argument(
        "--vectors",
        choices=["real", "random"],
        default="real",
        help="scale part: real SciFact vectors with noise (needs --scifact-index) or random unit vectors",
    )
    ap.add_argument("--milvus-sizes", help="sizes also run in milvus-lite (default: all of --sizes)")
    ap.add_argument("--milvus-queries", type=int, help="queries timed in milvus-lite (default: --queries)")
    ap.add_argument("--merge", action="store_true", help="update --out: parts not run keep their earlier results")
    ap.add_argument("--out", type=Path, default=bench_io.RESULTS / "scale.json")
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
        from benchmarks.scale import publish as scale_publish

        result["commit"] = bench_io.commit()
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
                row["vectors"] = (
                    f"SciFact MiniLM vectors ({len(base)}) + noise of norm {NOISE}" if base is not None else "random unit vectors"
                )
                result["scale"][str(n)] = row
                bench_io.write(dict(result), args.out)
                for p in work.glob(f"*-{n}*"):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
