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

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.encoders --quantisation --index DIR   (a default SciFact build)

`--quantisation` -> retrieval_quantisation.json: int8 recipes made from the product's fp32 export beside fp32 and
the default (`onnx-int8`: dynamic, per-channel weights): static int8 with per-tensor activation scales calibrated
once on a fixed, shipped text set (the paragraphs of docs/*.md) in both ONNX formats, and dynamic int8 with the
FFN output projections left fp32. Per recipe: cosine to fp32 and texts per CPU-second (each text alone, one
thread) on a sample of SciFact chunks, the largest change of a vector between alone and in padded batches of 8,
and, on the whole corpus, SciFact train (choosing) and test nDCG@10 at the default fusion: the default's from the
index's own vectors, another recipe's when `--whole` names it (each re-embeds the corpus).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks import bench_io
from benchmarks.bench_io import cpu_seconds as _cpu
from benchmarks.scale.encoder_sets import alternated, run_one

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
DATA = REPO.parent / "shared" / "data"
MEASURES = ["tools/index/", "agent/config/index.py", "tools/metrics.py", "benchmarks/retrieval/encoders.py"]


def _mean_se(values: list[float]) -> tuple[float, float]:
    return round(float(np.mean(values)), 4), round(float(np.std(values) / math.sqrt(len(values))), 4)


def quality(index, queries: dict, qrels: dict, qids: list[str]) -> dict:
    """The default retrieval and the former 50/50 weights on the same vectors, each query embedded once."""
    from ragsieve.agent.config import Config
    from ragsieve.agent.orchestrator import build_retriever  # the product's retriever, built from `[retrieval]`
    from ragsieve.tools.metrics import docs_from_chunks, ndcg_at_k, recall_at_k

    r = Config().retrieval
    retriever = build_retriever(index, Config())
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


RECIPES = {  # how each int8 graph is made from the fp32 export (None: fp32 itself; "product": onnx-int8's own file)
    "fp32": None,
    "dynamic (default)": "product",
    "dynamic, FFN output fp32": {"exclude": "/output/dense/MatMul"},
    "static QOperator, uint8 activations": {"format": "QOperator", "activations": "QUInt8"},
    "static QDQ, int8 activations": {"format": "QDQ", "activations": "QInt8"},
}


def _feeds(tokenizer, texts: list[str], width: int | None = None) -> dict[str, np.ndarray]:
    """One padded batch (to `width` tokens, or the longest text) in the graph's inputs."""
    encs = tokenizer.encode_batch(texts)
    n = width or max(len(e.ids) for e in encs)
    ids = np.asarray([e.ids + [0] * (n - len(e.ids)) for e in encs], np.int64)
    mask = np.asarray([e.attention_mask + [0] * (n - len(e.ids)) for e in encs], np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids}


def _recipe(name: str, folder: Path, work: Path, tokenizer) -> Path:
    """The graph of recipe `name`, quantised once into `work`; static scales from docs/*.md's long paragraphs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    spec, fp32, target = RECIPES[name], folder / "model.onnx", work / f"{name.replace(' ', '_').replace(',', '')}.onnx"
    if not isinstance(spec, dict) or target.is_file():
        return fp32 if spec is None else folder / "model-int8.onnx" if spec == "product" else target
    if "exclude" in spec:
        import onnx

        skip = [n.name for n in onnx.load(str(fp32)).graph.node if spec["exclude"] in n.name]
        quantize_dynamic(str(fp32), str(target), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=skip)
        return target
    texts = [p for f in sorted((REPO / "docs").glob("*.md")) for p in f.read_text("utf-8").split("\n\n") if len(p) > 200]

    class Reader(CalibrationDataReader):  # each text alone, padded to the window (fixed shapes for the calibrator)
        feeds = iter([_feeds(tokenizer, [t], 256) for t in texts[::4][:120]])

        def get_next(self):
            return next(self.feeds, None)

    here, source, dest = os.getcwd(), str(fp32.resolve()), str(target.resolve())
    os.chdir(work)  # its shape-inference and weight files land in the current folder
    try:
        quantize_static(
            source, dest, Reader(), quant_format=QuantFormat[spec["format"]], per_channel=True,
            activation_type=QuantType[spec["activations"]], weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
        )  # fmt: skip
    finally:
        os.chdir(here)
    return target


def quantisation(args) -> int:
    """`--quantisation`: the int8 recipes side by side (module docstring)."""
    import onnxruntime as ort

    from benchmarks.retrieval.methods import Sweep
    from ragsieve.tools.index.building.report import indexed_text
    from ragsieve.tools.index.embedders.onnx_query import OnnxQueryEmbedder

    sweep = Sweep(args.index, DATA / "scifact")
    texts = [indexed_text(c) for c in sweep.chunks]
    sample = texts[:: max(1, len(texts) // args.sample)][: args.sample]
    args.work.mkdir(parents=True, exist_ok=True)
    emb = OnnxQueryEmbedder.find(sweep.idx.manifest["embedding"]["model"], "onnx")
    folder = Path(emb.session._model_path).parent
    result = bench_io.header(measures=MEASURES) | {"index": str(args.index), "chunks": len(texts), "sample": len(sample)}
    result |= {"chosen_on": "SciFact train claims; test only reported", "calibration": "docs/*.md paragraphs", "recipes": {}}
    ref, own, own_qv, options = None, sweep.V, sweep.qv, ort.SessionOptions()  # own: the index's, the default's
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    for name, spec in RECIPES.items():
        path = _recipe(name, folder, args.work, emb.tokenizer)
        emb.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        cpu0 = _cpu()
        alone = emb.embed(sample)
        row = {"texts_per_cpu_s": round(len(sample) / (_cpu() - cpu0), 2), "load_average": os.getloadavg()[0]}
        ref = alone if ref is None else ref
        cos = (alone * ref).sum(1)
        row["cosine_to_fp32"] = {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)}
        batched = np.concatenate(
            [emb.session.run(None, _feeds(emb.tokenizer, sample[i : i + 8]))[0] for i in range(0, len(sample), 8)]
        )
        row["alone_vs_batched_max_abs"] = float(np.abs(batched / np.linalg.norm(batched, axis=1, keepdims=True) - alone).max())
        if spec != "product" and name in args.whole.split(";"):  # the corpus re-embedded: ~10 CPU-minutes a recipe
            cache = args.work / f"{path.stem}-{len(texts)}.npy"
            if not cache.is_file():
                with ThreadPoolExecutor(2) as pool:  # session.run releases the GIL
                    np.save(
                        cache, np.concatenate(list(pool.map(emb.embed, [texts[i : i + 500] for i in range(0, len(texts), 500)])))
                    )
            sweep.V, sweep.qv = np.load(cache), dict(zip(sweep.qv, emb.embed([sweep.queries[q] for q in sweep.qv])))
        if spec == "product" or name in args.whole.split(";"):
            row |= {split: sweep.score(split, w=0.4) for split in ("train", "test")}
            sweep.V, sweep.qv = own, own_qv
        result["recipes"][name] = row
        print(name, row, flush=True)
        bench_io.write(result, args.out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quantisation", action="store_true", help="the int8 recipes (retrieval_quantisation.json)")
    ap.add_argument("--index", type=Path, help="--quantisation: a default build of SciFact")
    ap.add_argument("--sample", type=int, default=300, help="--quantisation: chunks for speed and cosine")
    ap.add_argument("--whole", default="", help="--quantisation: recipes (separated by ;) scored on the corpus")
    ap.add_argument("--sets", default="scifact,squad2,hotpotqa")
    ap.add_argument("--encoders", default="onnx,onnx-int8")
    ap.add_argument("--limit-queries", type=int, help="the first N test queries (sorted ids) per set")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-retrieval-encoders")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_encoders.json")
    args = ap.parse_args(argv)
    if args.quantisation:
        args.out = args.out.with_name("retrieval_quantisation.json") if args.out.name == "retrieval_encoders.json" else args.out
        return quantisation(args)
    encoders = args.encoders.split(",")
    result = bench_io.header(measures=MEASURES) | {
        "chosen_on": "the weights: SciFact train claims (benchmarks/results/retrieval_methods.json); every figure "
        "here is on the sets' test qrels",
        "sets": {},
    }

    def one(name: str, encoder: str) -> dict:
        return run_one(name, encoder, args.work, args.limit_queries, score=quality)

    for name, rows in alternated(args.sets.split(","), encoders, one):
        result["sets"][name] = rows
        bench_io.write(result, args.out)  # each set as it finishes
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
