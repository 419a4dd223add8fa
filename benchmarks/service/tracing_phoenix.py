"""A traced `full`-plan question in Arize Phoenix's trace view: docs/tracing-phoenix.png.

    .venv/bin/python -m benchmarks.service.tracing_phoenix --phoenix /tmp/phoenix-venv/bin/phoenix

Phoenix is a receiver, installed in its own venv (`pip install arize-phoenix`), never our dependency. It starts
on 127.0.0.1 with a fresh working folder; the service traces to its OTLP endpoint with content capture on
(redacted); one `full`-plan question with a caller's `traceparent`; Debian's chromium (headless) opens
`/redirects/traces/<trace id>` and saves the screenshot; benchmarks/results/tracing-phoenix.json says what Phoenix
received (its REST API's spans for the trace, by kind).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.bench_io import REPO, RESULTS, header, write
from benchmarks.service.main import build_index
from benchmarks.service.tracing import MEASURES, QUESTION, serve

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
CHROMIUM += ["--disable-sync", "--hide-scrollbars"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen) -> float:
    """Seconds until `url` answers below 500; the server exiting first, or `timeout_s`, is an error."""
    import httpx

    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=5, trust_env=False).status_code < 500:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"{url} not up after {timeout_s:g}s")


def stop(proc: subprocess.Popen | None) -> None:
    """Stop a server started in its own process group: TERM, then KILL after 30 s."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def ask_traced(index: Path, base: str) -> dict:
    """One `full`-plan question through the service, tracing to Phoenix at `base` with redacted text."""
    import httpx

    from ragsieve.agent.config import TracingConfig
    from ragsieve.insights.redact import redact
    from ragsieve.tools import tracing

    tracing.configure(TracingConfig(endpoint=base + "/v1/traces", capture_content=True, service_name="ragsieve"), redact=redact)
    svc = serve(index)
    try:
        reply = httpx.post(
            f"{svc.base_url}/v1/ask",
            json={"question": QUESTION, "plan": "full"},
            headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
            timeout=120,
        )
        reply.raise_for_status()
        return reply.json()
    finally:
        svc.stop()
        tracing.flush(10.0)
        tracing.configure(TracingConfig(enabled=False))


def received(base: str, trace_id: str, expected: int) -> list[dict]:
    """Phoenix's spans of `trace_id` once at least `expected` arrived (it inserts in batches), else after 30 s."""
    import httpx

    spans: list[dict] = []
    for _ in range(30):
        got = httpx.get(f"{base}/v1/projects/default/spans", params={"limit": 1000}, timeout=10)
        if got.status_code == 200:
            spans = [s for s in got.json().get("data", []) if s.get("context", {}).get("trace_id") == trace_id]
            if len(spans) >= expected:
                break
        time.sleep(1)
    return spans


def phoenix(index: Path, phoenix_bin: str, shot: Path, chromium: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="ragsieve-phoenix-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    base = f"http://127.0.0.1:{port}"
    with open(work / "phoenix.log", "w") as log:
        proc = subprocess.Popen([phoenix_bin, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_http(base + "/", 180, proc)
            body = ask_traced(index, base)
            spans = received(base, body["trace_id"], len(body["trace"]))
            shot.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [chromium, *CHROMIUM, f"--user-data-dir={work / 'chromium'}", "--window-size=1600,1000"]
                + ["--virtual-time-budget=20000", f"--screenshot={shot}", f"{base}/redirects/traces/{body['trace_id']}"],
                check=True,
                timeout=120,
                capture_output=True,
            )
        finally:
            stop(proc)
    kinds = Counter(s.get("span_kind") or (s.get("attributes") or {}).get("openinference.span.kind") or "?" for s in spans)
    python = str(Path(phoenix_bin).with_name("python"))
    version = subprocess.run([python, "-c", "import phoenix; print(phoenix.__version__)"], capture_output=True, text=True)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "trace_id": body["trace_id"],
        "caller_trace": CALLER_TRACE,
        "steps": [e["step"] for e in body["trace"]],
        "phoenix_spans_for_trace": len(spans),
        "phoenix_span_kinds": dict(kinds),
        "phoenix_version": version.stdout.strip(),
        "screenshot": str(shot.relative_to(REPO)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phoenix", required=True, metavar="PHOENIX_BIN", help="Phoenix's `phoenix` command (its own venv)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-tracing-index")
    parser.add_argument("--out", type=Path, default=RESULTS / "tracing-phoenix.json")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        print(f"no chromium at {args.chromium}: apt-get install chromium", file=sys.stderr)
        return 2
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        os.environ.pop(name)
    result = header([*MEASURES, "benchmarks/service/tracing_phoenix.py"])
    result |= phoenix(build_index(args.index), args.phoenix, REPO / "docs" / "tracing-phoenix.png", args.chromium)
    write(result, args.out)
    print(json.dumps({k: v for k, v in result.items() if k.startswith("phoenix") or k == "steps"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
