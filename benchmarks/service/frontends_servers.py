"""The servers of the Open WebUI benchmarks (`benchmarks/service/frontends.py`, `benchmarks/access_openwebui.py` (retired; at its result's commit)): a free
loopback port, waiting for a server to answer, stopping its process group, Open WebUI's own venv, and steps 1-3
of `frontends.py` (the demo index, `ragsieve serve`, `open-webui serve` in single-user mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]

DEMO_FOLDERS = ["examples/docs", "examples/code"]  # what `make demo` indexes, so the README's conversation


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen) -> float:
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
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def ensure_venv(venv: Path, log: Path) -> None:
    if (venv / "bin" / "open-webui").exists():
        return
    with open(log, "a") as out:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=out, stderr=out)
        pip = [str(venv / "bin" / "pip"), "install", "--quiet"]
        subprocess.run(pip + ["torch==2.13.0"], check=True, stdout=out, stderr=out, timeout=3600)
        subprocess.run(pip + ["open-webui", "playwright"], check=True, stdout=out, stderr=out, timeout=3600)


def access_lines(log: Path) -> list[str]:
    return [ln.split(" access ", 1)[1] for ln in log.read_text(errors="replace").splitlines() if " access " in ln]


def start_servers(args: argparse.Namespace, work: Path, procs: list[subprocess.Popen], result: dict) -> str:
    """Steps 1-3: Open WebUI's venv, the demo index (`make demo`'s folders), `ragsieve serve`, `open-webui serve`;
    the Open WebUI URL."""
    t = time.monotonic()
    ensure_venv(args.venv, work / "install.log")
    result["timings_s"]["venv"] = round(time.monotonic() - t, 1)
    ver = subprocess.run(
        [str(args.venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('open-webui'))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    result["open_webui_version"] = ver.stdout.strip()
    ragsieve = Path(sys.executable).parent / "ragsieve"
    index, serve_log, owui_log = work / "index", work / "serve.log", work / "openwebui.log"
    subprocess.run(
        [str(ragsieve), "index", *DEMO_FOLDERS, "--index", str(index)], check=True, cwd=REPO, capture_output=True, timeout=900
    )
    rport, oport = free_port(), free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.llm_base_url:
        env["RAGSIEVE_BASE_URL"] = args.llm_base_url
    t = time.monotonic()
    serve = subprocess.Popen(
        [
            str(ragsieve),
            "serve",
            "--index",
            f"demo={index}",
            "--port",
            str(rport),
            "--request-timeout",
            str(args.answer_timeout),
            "--llm-parallel",
            "2",
        ],
        stdout=open(serve_log, "w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    procs.append(serve)
    wait_http(f"http://127.0.0.1:{rport}/healthz", 300, serve)
    wait_http(f"http://127.0.0.1:{rport}/readyz", 600, serve)
    result["timings_s"]["ragsieve_ready"] = round(time.monotonic() - t, 1)
    owui_env = dict(
        env,
        DATA_DIR=str(work / "owui-data"),
        WEBUI_AUTH="False",
        OFFLINE_MODE="True",
        ENABLE_OLLAMA_API="False",
        OPENAI_API_BASE_URL=f"http://127.0.0.1:{rport}/v1",
        OPENAI_API_KEY="not-needed",
        ENABLE_VERSION_UPDATE_CHECK="False",
        ANONYMIZED_TELEMETRY="False",
        SCARF_NO_ANALYTICS="true",
        DO_NOT_TRACK="true",
        WEBUI_SECRET_KEY="frontends-benchmark-only",
        no_proxy="127.0.0.1,localhost",
    )
    t = time.monotonic()
    owui = subprocess.Popen(
        [str(args.venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(oport)],
        stdout=open(owui_log, "w"),
        stderr=subprocess.STDOUT,
        env=owui_env,
        cwd=work,
        start_new_session=True,
    )
    procs.append(owui)
    wait_http(f"http://127.0.0.1:{oport}/health", 900, owui)
    result["timings_s"]["open_webui_ready"] = round(time.monotonic() - t, 1)
    return f"http://127.0.0.1:{oport}"
