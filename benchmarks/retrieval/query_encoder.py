"""Issue 60: the query side's encoder against int8 document vectors -> benchmarks/results/retrieval_query_encoder.json.

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.query_encoder --index DIR [--sets hotpotqa,squad2]

Documents keep the default build's int8 vectors (DIR); queries are embedded by the int8 graph (the default), fp32,
or int8 with the FFN output MatMul fp32 (retrieval_quantisation.json's recipe). Per query encoder: SciFact train
nDCG@10 per fusion weight (`methods.Sweep`), the weight chosen on train, test at it and at 0.4, and the query
embedding p50 (ms, one thread). `--sets`: each set's default build, first-stage Recall@10/@100 (± s.e.) through
the product retriever at the default weights, per query encoder.
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import bench_io

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
WEIGHTS = (0.35, 0.4, 0.45, 0.5, 0.55)  # the dense share, as methods.py's weights family
MEASURES = ["tools/index/", "agent/config/index.py", "tools/metrics.py", "benchmarks/retrieval/query_encoder.py"]


def encoders(model: str, work: Path) -> dict:
    """Name -> an OnnxQueryEmbedder whose session runs that graph (documents stay int8 throughout)."""
    import onnxruntime as ort

    from ragsieve.tools.index.embedders.onnx_query import OnnxQueryEmbedder

    out = {"int8 (default)": OnnxQueryEmbedder.find(model, "onnx-int8"), "fp32": OnnxQueryEmbedder.find(model, "onnx")}
    ffn = OnnxQueryEmbedder.find(model, "onnx")
    assert ffn is not None and out["fp32"] is not None and out["int8 (default)"] is not None, "no ONNX export found"
    work.mkdir(parents=True, exist_ok=True)
    path, fp32 = work / "ffn-output-fp32.onnx", ffn.session._model_path  # encoders.py's RECIPES, made the same way
    if not path.is_file():
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        skip = [n.name for n in onnx.load(fp32).graph.node if "/output/dense/MatMul" in n.name]
        quantize_dynamic(fp32, str(path), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=skip)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    ffn.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    out["dynamic, FFN output fp32"] = ffn
    return out


def timed(emb, texts: list[str]) -> tuple[list[np.ndarray], float]:
    emb.embed(["warm up"])
    vectors, ms = [], []
    for t in texts:
        t0 = time.perf_counter()
        vectors.append(emb.embed([t])[0])
        ms.append((time.perf_counter() - t0) * 1000)
    return vectors, round(float(np.percentile(ms, 50)), 3)


def scifact(index: Path, work: Path) -> dict:
    from benchmarks.retrieval.methods import Sweep

    sweep = Sweep(index, DATA / "scifact")
    rows, qids = {}, list(sweep.qv)
    for name, emb in encoders(sweep.idx.manifest["embedding"]["model"], work).items():
        vectors, p50 = timed(emb, [sweep.queries[q] for q in qids])
        sweep.qv = dict(zip(qids, vectors))
        train = {str(w): sweep.score("train", w=w) for w in WEIGHTS}
        chosen = max(WEIGHTS, key=lambda w: train[str(w)]["ndcg@10"])
        rows[name] = {"query_embedding_ms_p50": p50, "train": train, "chosen_w": chosen}
        rows[name]["test_at_chosen"] = sweep.score("test", w=chosen)
        rows[name]["test_at_0.4"] = sweep.score("test", w=0.4)
        print(name, rows[name], flush=True)
    return rows


def first_stage(name: str, work: Path) -> dict:
    """One set's default build; Recall@10/@100 of the product retriever per query encoder."""
    from ragsieve.agent.config import Config
    from ragsieve.agent.orchestrator import _retriever
    from ragsieve.tools.datasets.beir import read_qrels, read_queries
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.metrics import docs_from_chunks, recall_at_k

    folder, target = DATA / name, work / name
    shutil.rmtree(target, ignore_errors=True)
    IndexBuilder(target, progress=False).build([next(folder.glob("corpus.jsonl*"))])
    queries, qrels = read_queries(folder / "queries.jsonl"), read_qrels(folder / "qrels" / "test.tsv")
    qids = sorted(q for q in qrels if q in queries)
    rows: dict = {"queries": len(qids)}
    with HybridIndex.open(target) as index:
        retriever, k = _retriever(index, Config()), Config().retrieval.candidate_k
        rows["document_encoder"] = index.manifest["embedding"].get("encoder")
        for enc, emb in encoders(index.manifest["embedding"]["model"], work).items():
            vectors, _ = timed(emb, [queries[q] for q in qids])
            rec: dict[int, list[float]] = {10: [], 100: []}
            for q, v in zip(qids, vectors):
                docs = docs_from_chunks(h.chunk_id for h in retriever.run(queries[q], top_k=k, query_vector=v))
                for n in rec:
                    rec[n].append(recall_at_k(docs, qrels[q], n))
            rows[enc] = {
                f"recall@{n}": [round(float(np.mean(r)), 4), round(float(np.std(r) / math.sqrt(len(r))), 4)]
                for n, r in rec.items()
            }
            print(name, enc, rows[enc], flush=True)
    shutil.rmtree(target, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True, help="a default (onnx-int8) build of SciFact")
    ap.add_argument("--sets", default="", help="first-stage recall on these sets too (comma separated)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-query-encoder")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_query_encoder.json")
    args = ap.parse_args(argv)
    result = bench_io.header(measures=MEASURES) | {
        "index": str(args.index),
        "chosen_on": "SciFact train qrels (809 claims); test (300) only reported; documents int8 throughout",
        "scifact": scifact(args.index, args.work),
    }
    bench_io.write(result, args.out)
    for name in filter(None, args.sets.split(",")):
        result[name] = first_stage(name, args.work)
        bench_io.write(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
