"""Bounded load test of `ragsieve serve` on loopback -> benchmarks/results/service.json.

    nice -n 5 .venv/bin/python -m benchmarks.service.main [--requests 48] [--levels 1,4,16] [--model-requests 8]

Two back ends, the `fast` plan, questions about examples/ (the demo corpus):
(a) a fake instant LLM (FakeChat): measures ragsieve's own overhead. The same
    questions are first answered by `Orchestrator.ask` in-process; the server's
    p50 at 1 client minus that p50 is the HTTP/serving overhead (target <= 10 ms).
(b) a real model: the embedded llama.cpp server (0.5B, `--llm-parallel` slots),
    or any OpenAI-compatible endpoint named by OPENAI_BASE_URL/OPENAI_MODEL.
    Target: throughput at 4 clients >= 1.5x that at 1 client; TTFT p50 reported.
Both paths are measured warm (the index caches query vectors, so repeated
questions skip the encoder in both). Each level sends a fixed number of requests (non-streamed for latency, then
streamed for time to first token), counts errors and 429s separately, and the
server stops itself (ServiceThread lifetime). Load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks import bench_io  # noqa: E402

REPO = bench_io.REPO
pct = bench_io.percentile
QUESTIONS = [
    "How do I rotate the API key of a Lumen workspace?",
    "What happens to the old key after rotation?",
    "How do I create a workspace?",
    "What are the rate limits of the API?",
    "How do I paginate results?",
    "Which environment variable holds the API key?",
    "How do I retry a failed request?",
    "How are webhooks signed?",
    "What does the quickstart do?",
    "How do I delete a workspace?",
]
ANSWER = "Rotate it with `lumen keys rotate` [1]; the old key stays valid for 24 hours [2]."


def load_level(base: str, clients: int, total: int, model: str, stream: bool, max_tokens: int | None) -> dict:
    latencies, ttfts, codes = [], [], []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker():
        with httpx.Client(timeout=900) as c:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                body = {
                    "model": model,
                    "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                    "stream": stream,
                }
                if max_tokens:
                    body["max_tokens"] = max_tokens
                started = time.perf_counter()
                first = None
                try:
                    if stream:
                        with c.stream("POST", base + "/v1/chat/completions", json=body) as r:
                            for line in r.iter_lines():
                                if first is None and '"content": "' in line and '"content": ""' not in line:
                                    first = time.perf_counter() - started
                            code = r.status_code
                    else:
                        code = c.post(base + "/v1/chat/completions", json=body).status_code
                except httpx.HTTPError:
                    code = -1
                elapsed = time.perf_counter() - started
                with lock:
                    codes.append(code)
                    if code == 200:
                        latencies.append(elapsed)
                        if first is not None:
                            ttfts.append(first)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    ok = sum(1 for c in codes if c == 200)
    return {
        "clients": clients,
        "requests": total,
        "stream": stream,
        "ok": ok,
        "errors": sum(1 for c in codes if c not in (200, 429)),
        "rejected_429": codes.count(429),
        "wall_s": round(wall, 3),
        "throughput_rps": round(ok / wall, 3) if wall else None,
        "p50_s": pct(latencies, 0.5),
        "p95_s": pct(latencies, 0.95),
        "p99_s": pct(latencies, 0.99),
        "ttft_p50_s": pct(ttfts, 0.5),
        "ttft_p95_s": pct(ttfts, 0.95),
    }


def build_index(folder: Path) -> Path:
    from ragsieve.tools.index.building.builder import IndexBuilder

    if not (folder / "current").exists() and not any(folder.glob("gen-*")):
        IndexBuilder(folder, progress=False).build([str(REPO / "examples")])
    return folder


def run_backend(
    name: str,
    index: Path,
    llm,
    levels: list[int],
    requests: int,
    max_tokens: int | None,
    llm_parallel: int,
    max_concurrent: int,
    overhead: bool = True,
) -> dict:
    """One back end's levels. `overhead`: the server's p50 less `Orchestrator.ask`'s is the serving overhead only
    when the LLM's own time does not vary (the fake); with a model it is the difference of two noisy samples."""
    from ragsieve import Config
    from ragsieve.service.app import create_app
    from ragsieve.service.indexes.registry import IndexRegistry
    from ragsieve.service.server import ServiceThread
    from ragsieve.service.settings import ServiceSettings

    settings = ServiceSettings(
        port=0, max_concurrent=max_concurrent, queue_limit=64, llm_parallel=llm_parallel, request_timeout_s=900
    )
    registry = IndexRegistry({"demo": index}, Config(), llm=llm, llm_parallel=llm_parallel)
    out: dict = {"backend": name, "levels": []}
    try:
        orch = registry.orchestrators["demo"]
        direct = []
        options = {"max_tokens": max_tokens} if max_tokens else {}
        for q in QUESTIONS:  # warm-up: the model, and the query-vector cache both paths then share
            orch.ask(q, plan="fast", answer_options=options)
        for i in range(min(requests, 2 * len(QUESTIONS))):
            started = time.perf_counter()
            orch.ask(QUESTIONS[i % len(QUESTIONS)], plan="fast", answer_options=options)
            direct.append(time.perf_counter() - started)
        out["orchestrator_ask"] = {"n": len(direct), "p50_s": pct(direct, 0.5), "p95_s": pct(direct, 0.95)}
        app = create_app(registry, settings, preload_model=False)
        with ServiceThread(app, settings, lifetime_s=3600) as svc:
            load_level(svc.base_url, 1, 4, "demo", False, max_tokens)  # warm-up, not reported
            for clients in levels:
                for stream in (False, True):
                    row = load_level(svc.base_url, clients, requests, "demo", stream, max_tokens)
                    print(f"  {name} clients={clients} stream={stream}: {json.dumps(row)}", flush=True)
                    out["levels"].append(row)
    finally:
        registry.close()
    one = next((r for r in out["levels"] if r["clients"] == 1 and not r["stream"]), None)
    if not overhead:
        out["overhead_p50_ms"] = None
        out["overhead_note"] = "not measured with a model: its answer time varies by more than the overhead"
    elif one and one["p50_s"] is not None and out["orchestrator_ask"]["p50_s"] is not None:
        out["overhead_p50_ms"] = round(1000 * (one["p50_s"] - out["orchestrator_ask"]["p50_s"]), 2)
    four = next((r for r in out["levels"] if r["clients"] == 4 and not r["stream"]), None)
    if one and four and one["throughput_rps"]:
        out["throughput_4_over_1"] = round(four["throughput_rps"] / one["throughput_rps"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=48, help="requests per level, fake LLM")
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--model-requests", type=int, default=8, help="requests per level, real model")
    ap.add_argument("--model-levels", default="1,4")
    ap.add_argument("--max-tokens", type=int, default=48, help="answer length with the real model")
    ap.add_argument("--llm-parallel", type=int, default=4)
    ap.add_argument("--skip-model", action="store_true")
    ap.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-service-bench-index")
    ap.add_argument("--out", type=Path, default=bench_io.RESULTS / "service.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragsieve.agent.config import LLMConfig
    from ragsieve.agent.llm.client import LLM
    from ragsieve.agent.llm.factory import describe_endpoint, open_llm
    from ragsieve.testing import FakeChat

    started = time.time()
    index = build_index(args.index)
    levels = [int(x) for x in args.levels.split(",")]
    result = {**bench_io.header(), "backends": []}
    print("fake instant LLM", flush=True)
    result["backends"].append(
        run_backend(
            "fake-instant-llm",
            index,
            LLM(FakeChat(default=ANSWER)),
            levels,
            args.requests,
            None,
            args.llm_parallel,
            max_concurrent=8,
        )
    )
    if not args.skip_model:
        cfg = LLMConfig(parallel=args.llm_parallel, timeout_s=900, max_retry_s=900)
        print(f"model: {describe_endpoint(cfg)}", flush=True)
        llm, close = open_llm(cfg)
        try:
            row = run_backend(
                "model: " + describe_endpoint(cfg),
                index,
                llm,
                [int(x) for x in args.model_levels.split(",")],
                args.model_requests,
                args.max_tokens,
                args.llm_parallel,
                max_concurrent=args.llm_parallel,
                overhead=False,
            )
        finally:
            close()
        result["backends"].append(row)
    result["elapsed_s"] = round(time.time() - started, 1)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
