"""Parts 2 and 3 of scale.py: encoder throughput on SciFact abstracts (torch, onnx, onnx-int8, with each path's
cosine agreement to torch) and BM25 built while encoding against after it."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

from benchmarks.bench_io import SCIFACT, corpus_slice


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
        row = {"docs_per_s": round(len(texts) / seconds, 2), "seconds": round(seconds, 1), "load_average": os.getloadavg()[0]}
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


def build_overlap(n_docs: int, work: Path) -> dict:
    """Index build of `n_docs` SciFact abstracts with BM25 overlapped with encoding, and without (torch)."""
    from ragsieve.tools.index.building.builder import IndexBuilder

    source = corpus_slice(work / "overlap-corpus.jsonl", n_docs)
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
