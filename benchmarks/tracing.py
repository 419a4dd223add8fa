"""Tracing's cost and its picture: the service's own overhead traced against untraced, side by side in one run,
and (`--phoenix`) a traced `full`-plan question shown in Arize Phoenix's trace view.

    nice -n 10 .venv/bin/python benchmarks/tracing.py --questions 200
    .venv/bin/python benchmarks/tracing.py --phoenix /tmp/phoenix-venv/bin/phoenix --questions 0

Overhead: `ragsieve serve`'s app on 127.0.0.1 over an index of examples/ and a scripted model (no model time,
so the figure is the pipeline's own), `POST /v1/ask` with the `full` plan, in alternating blocks: tracing off,
then on with the OTLP/HTTP exporter batching to a receiver on 127.0.0.1 that accepts every batch (the cost of
export runs on the exporter's thread, as in production). Result: benchmarks/results/tracing-overhead.json (p50
and p95 per arm, their difference, spans per question).

Phoenix (opt-in: Phoenix is a receiver, installed in its own venv, never our dependency): Phoenix started on
127.0.0.1 with a fresh working folder, the service tracing to its OTLP endpoint with content capture on
(redacted), one `full`-plan question with a caller's `traceparent`; Debian's chromium (headless) opens
`/redirects/traces/<trace id>` and saves docs/tracing-phoenix.png; benchmarks/results/tracing-phoenix.json says
what Phoenix received (its REST API's span count for the trace).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_io import header, write  # noqa: E402

QUESTION = "How do I rotate the API key of a Lumen workspace, and what happens to the old key?"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
MEASURES = [
    "tools/tracing",
    "agent/plan/traced.py",
    "agent/llm/traced.py",
    "ragsieve/service/middleware/tracing.py",
    "agent/plan/runner.py",
    "agent/llm/client.py",
    "benchmarks/tracing.py",
]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def scripted(messages):
    """Judge: all relevant; validate: resolved; else an answer citing [1] (the tests' full-plan model)."""
    prompt = messages[0]["content"]
    if "mapping an index to the chunk's text" in prompt:
        body = prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0]
        return json.dumps({k: True for k in json.loads(body)})
    if "Draft answer:" in prompt:
        return json.dumps({"resolved": True, "reason": "scripted"})
    return "Rotate the key in the workspace settings [1]; the old key stops working [2]."


class Sink:
    """An OTLP/HTTP receiver on 127.0.0.1 that accepts every batch and counts its bytes (it stops with us)."""

    def __init__(self) -> None:
        owner = self
        self.batches = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.batches += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"


def build_index(folder: Path) -> Path:
    from ragsieve.tools.index.building.builder import IndexBuilder

    if not (folder / "CURRENT").exists():
        IndexBuilder(folder, progress=False).build([str(ROOT / "examples")])
    return folder


def serve(index: Path):
    from ragsieve import Config
    from ragsieve.agent.llm.client import LLM
    from ragsieve.service.app import create_app
    from ragsieve.service.indexes.registry import IndexRegistry
    from ragsieve.service.server import ServiceThread
    from ragsieve.service.settings import ServiceSettings
    from ragsieve.testing import FakeChat

    registry = IndexRegistry({"docs": index}, Config(), llm=LLM(FakeChat(default=scripted)))
    app = create_app(registry, ServiceSettings(port=0), preload_model=False)
    return ServiceThread(app, ServiceSettings(port=0), lifetime_s=1800).start()


def overhead(index: Path, questions: int, block: int) -> dict:
    import httpx

    from ragsieve.agent.config import TracingConfig
    from ragsieve.tools import tracing
    from ragsieve.tools.metrics import percentile

    sink = Sink()
    on = TracingConfig(endpoint=sink.endpoint)
    off = TracingConfig(enabled=False)
    svc = serve(index)
    times: dict[str, list[float]] = {"untraced": [], "traced": []}
    try:
        with httpx.Client(base_url=svc.base_url, timeout=120) as client:
            last: dict = {}

            def ask() -> float:
                started = time.perf_counter()
                reply = client.post("/v1/ask", json={"question": QUESTION, "plan": "full"})
                took = time.perf_counter() - started
                reply.raise_for_status()
                last["body"] = reply.json()
                return took

            tracing.configure(on)
            for _ in range(3):
                ask()  # warm both paths: caches, the exporter's connection
            tracing.configure(off)
            for _ in range(3):
                ask()
            done = 0
            while done < questions:
                for arm, settings in (("untraced", off), ("traced", on)):
                    tracing.configure(settings)
                    times[arm].extend(ask() for _ in range(block))
                done += block
            tracing.configure(on)
            tracer = tracing.spans._tracer
            exporter_spans = []
            original = tracer.exporter.inner.export

            def counting(spans):
                exporter_spans.extend(spans)
                return original(spans)

            tracer.exporter.inner.export = counting
            ask()
            tracing.flush(10.0)
            trace_id = int(last["body"]["trace_id"], 16)
            spans_per_question = sum(1 for sp in exporter_spans if sp.context.trace_id == trace_id)
    finally:
        svc.stop()
        tracing.configure(off)
    arms = {
        arm: {"n": len(v), "p50_ms": round(1000 * percentile(v, 50), 3), "p95_ms": round(1000 * percentile(v, 95), 3)}
        for arm, v in times.items()
    }
    cost = span_cost(sink.endpoint)
    per_span = cost["cpu_us_per_span"]["spans_otlp_batched"] - cost["cpu_us_per_span"]["off"]
    return {
        "arms": arms,
        **cost,
        "cpu_ms_per_question": round(per_span * spans_per_question / 1000, 3),
        "p50_overhead_ms": round(arms["traced"]["p50_ms"] - arms["untraced"]["p50_ms"], 3),
        "p95_overhead_ms": round(arms["traced"]["p95_ms"] - arms["untraced"]["p95_ms"], 3),
        "p50_ratio": round(arms["traced"]["p50_ms"] / arms["untraced"]["p50_ms"], 4),
        "spans_per_question": spans_per_question,
        "block": block,
        "batches_received": sink.batches,
        "plan": "full",
        "model": "scripted (no model time)",
    }


def span_cost(endpoint: str, n: int = 3000) -> dict:
    """CPU microseconds per span (process time, so the exporter thread's encoding and sending count too, and
    other processes' load does not): off, spans on a provider with no exporter, spans batched to OTLP/HTTP."""
    from opentelemetry.sdk.trace import TracerProvider

    from ragsieve.agent.config import TracingConfig
    from ragsieve.tools import tracing

    def run() -> float:
        started = time.process_time()
        for _ in range(n):
            with tracing.span("ragsieve.step.bench", tracing.Kind.CHAIN, {"ragsieve.plan": "full", "n": 1}) as span:
                span.update({f"ragsieve.step.k{j}": j for j in range(10)})
        tracing.flush(30.0)
        return round((time.process_time() - started) / n * 1e6, 2)

    out = {}
    for arm, settings, provider in (
        ("off", TracingConfig(enabled=False), None),
        ("spans_no_export", TracingConfig(enabled=True), TracerProvider()),
        ("spans_otlp_batched", TracingConfig(endpoint=endpoint), None),
    ):
        tracing.configure(settings, tracer_provider=provider)
        run()  # warm
        out[arm] = run()
    tracing.configure(TracingConfig(enabled=False))
    return {"cpu_us_per_span": out, "spans_timed": n}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def phoenix(index: Path, phoenix_bin: str, shot: Path, chromium: str) -> dict:
    import httpx

    from ragsieve.agent.config import TracingConfig
    from ragsieve.insights.redact import redact
    from ragsieve.tools import tracing

    work = Path(tempfile.mkdtemp(prefix="ragsieve-phoenix-"))
    port, grpc = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    for name in list(env):
        if name.startswith("OTEL_"):
            env.pop(name)
    log = open(work / "phoenix.log", "w")
    proc = subprocess.Popen([phoenix_bin, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        ends = time.monotonic() + 180
        while True:
            try:
                if httpx.get(base + "/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > ends or proc.poll() is not None:
                raise RuntimeError(f"Phoenix did not start; see {work / 'phoenix.log'}")
            time.sleep(1)
        tracing.configure(
            TracingConfig(endpoint=base + "/v1/traces", capture_content=True, service_name="ragsieve"), redact=redact
        )
        svc = serve(index)
        try:
            reply = httpx.post(
                f"{svc.base_url}/v1/ask",
                json={"question": QUESTION, "plan": "full"},
                headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                timeout=120,
            )
            reply.raise_for_status()
            body = reply.json()
        finally:
            svc.stop()
        tracing.flush(10.0)
        trace_id = body["trace_id"]
        spans = []
        for _ in range(30):  # Phoenix inserts spans in batches
            got = httpx.get(f"{base}/v1/projects/default/spans", params={"limit": 1000}, timeout=10)
            if got.status_code == 200:
                spans = [s for s in got.json().get("data", []) if s.get("context", {}).get("trace_id") == trace_id]
                if len(spans) >= len(body["trace"]):
                    break
            time.sleep(1)
        profile = work / "chromium"
        shot.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--hide-scrollbars",
                "--window-size=1600,1000",
                "--virtual-time-budget=20000",
                f"--screenshot={shot}",
                f"{base}/redirects/traces/{trace_id}",
            ],
            check=True,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kinds: dict[str, int] = {}
        for s in spans:
            kind = s.get("span_kind") or (s.get("attributes") or {}).get("openinference.span.kind") or "?"
            kinds[kind] = kinds.get(kind, 0) + 1
        version = subprocess.run(
            [str(Path(phoenix_bin).with_name("python")), "-c", "import phoenix; print(phoenix.__version__)"],
            capture_output=True,
            text=True,
        ).stdout
        return {
            "trace_id": trace_id,
            "caller_trace": CALLER_TRACE,
            "steps": [e["step"] for e in body["trace"]],
            "phoenix_spans_for_trace": len(spans),
            "phoenix_span_kinds": kinds,
            "phoenix_version": version.strip(),
            "screenshot": str(shot.relative_to(ROOT)),
        }
    finally:
        tracing.configure(TracingConfig(enabled=False))
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=200, help="questions per arm (0: no overhead run)")
    parser.add_argument("--block", type=int, default=10, help="questions per alternating block")
    parser.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-tracing-index")
    parser.add_argument("--phoenix", metavar="PHOENIX_BIN", help="Phoenix's `phoenix` command (its own venv)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        os.environ.pop(name)
    index = build_index(args.index)
    if args.questions > 0:
        result = header(MEASURES) | overhead(index, args.questions, args.block)
        write(result, args.out / "tracing-overhead.json")
        print(
            json.dumps(
                {
                    k: result[k]
                    for k in (
                        "arms",
                        "p50_overhead_ms",
                        "p95_overhead_ms",
                        "spans_per_question",
                        "cpu_us_per_span",
                        "cpu_ms_per_question",
                    )
                }
            )
        )
    if args.phoenix:
        if not Path(args.chromium).exists():
            print(f"no chromium at {args.chromium}: apt-get install chromium", file=sys.stderr)
            return 2
        result = header(MEASURES) | phoenix(index, args.phoenix, ROOT / "docs" / "tracing-phoenix.png", args.chromium)
        write(result, args.out / "tracing-phoenix.json")
        print(json.dumps({k: v for k, v in result.items() if k.startswith("phoenix") or k == "steps"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
