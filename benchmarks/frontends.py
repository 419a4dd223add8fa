"""A real Open WebUI (PyPI) pointed at `ragsieve serve`, driven by headless Chromium: a question, a follow-up, an off-topic question.

Not part of `make test` (it installs Open WebUI into its own venv and runs a
real model). Steps, each bounded in time, every server on 127.0.0.1:
1. a venv for Open WebUI (`--owui-venv`; created when missing: the CPU wheel
   `torch==2.13.0` first, then `open-webui` and `playwright` from PyPI);
2. the demo index (`make demo`'s `examples/docs` and `examples/code`) and `ragsieve serve` over it (the embedded
   model, or `--llm-base-url`); or, with `--openwebui-url`, an Open WebUI already started as the README says;
3. `open-webui serve` in single-user mode (WEBUI_AUTH=False, OFFLINE_MODE) with ragsieve as its only
   OpenAI connection, default settings otherwise;
4. Debian's `chromium` through Playwright opens the chat, picks the index's model, asks a question,
   a follow-up and a question the documents cannot answer, and reads the answers as shown, the chat's
   title, and the chat as Open WebUI stored it (`/api/v1/chats/{id}`: each message and its sources).
Checks (`benchmarks/frontends_checks.py`): each answer arrives once (not streamed twice), Open WebUI lists
one source per cited anchor (named `[n]`, at its own `#anchor`/`#L..` location, "N Sources" on the page),
an answer that cites nothing says so, and the chat is titled without an error shown.
The result (pass/fail per check, timings, the requests ragsieve saw from Open WebUI per task, commit,
command, load average) goes to `benchmarks/results/frontends_openwebui.json`; a step that cannot run is
recorded with the reason.

    nice -n 10 python benchmarks/frontends.py --owui-venv /path/to/owui-venv
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_io import header, write  # noqa: E402
from frontends_checks import Reply, check_all  # noqa: E402
from scripted_llm import ScriptedLLM  # noqa: E402

QUESTION = "How do I rotate the API key of a Lumen workspace?"
FOLLOW_UP = "And what happens to the old one after that?"
OFF_TOPIC = "Who wrote the novel Moby-Dick?"  # the documents cannot answer it
QUESTIONS = [QUESTION, FOLLOW_UP, OFF_TOPIC]
DEMO_FOLDERS = ["examples/docs", "examples/code"]  # what `make demo` indexes, so the README's conversation
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or "unknown"


def access_lines(log: Path) -> list[str]:
    return [ln.split(" access ", 1)[1] for ln in log.read_text(errors="replace").splitlines() if " access " in ln]


DRIVER = r'''
import json, sys, time
from playwright.sync_api import sync_playwright
url, model, questions, timeout_s, flags = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
shot, steps_file, chat_file = sys.argv[6], sys.argv[7], sys.argv[8]
token = sys.argv[9] if len(sys.argv) > 9 else ""  # an Open WebUI user's token when auth is on
out = {"steps": []}
def step(name, **kw):
    out["steps"].append({"step": name, "t": round(time.monotonic() - t0, 2), **kw}); print(json.dumps(out["steps"][-1]), flush=True)
    open(steps_file, "a").write(json.dumps(out["steps"][-1]) + "\n")
def last_answer(page):
    items = page.locator("#response-content-container")
    return items.nth(items.count() - 1).inner_text() if items.count() else ""
def wait_answer(page, n, limit):
    ends = time.monotonic() + limit
    stable, last = 0, None
    while time.monotonic() < ends:
        items = page.locator("#response-content-container")
        if items.count() >= n:
            text = items.nth(n - 1).inner_text()
            generating = page.locator("button[aria-label='Stop'], #stop-response-button").count() > 0
            if text.strip() and text == last and not generating:
                stable += 1
                if stable >= 3:
                    return text
            else:
                stable = 0
            last = text
        time.sleep(1.0)
    return None
def ask(page, text):
    box = page.locator("#chat-input")
    box.click()
    box.fill(text) if box.evaluate("e => e.tagName") == "TEXTAREA" else page.keyboard.type(text)
    page.keyboard.press("Enter")
t0 = time.monotonic()
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=flags, headless=True)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.set_default_timeout(60000)
    if token:
        page.add_init_script("localStorage.setItem('token', " + json.dumps(token) + ")")
    page.goto(url + "/?models=" + model, wait_until="domcontentloaded", timeout=180000)  # socket.io: never idle
    step("page_loaded", title=page.title())
    page.wait_for_selector("#chat-input", timeout=300000)  # single-user mode (or the token) signs in (slow when busy)
    time.sleep(3)
    for label in ("Okay, Let's Go!", "Got it"):  # the release-notes modal of a fresh install
        btn = page.get_by_role("button", name=label)
        if btn.count():
            btn.first.click()
            time.sleep(1)
    step("chat_ready")
    for n, question in enumerate(questions, start=1):
        ask(page, question)
        step("sent", n=n, question=question)
        text = wait_answer(page, n, timeout_s)
        step("answered", n=n, ok=text is not None, text=(text or last_answer(page))[:3000])
    time.sleep(5)
    step("title", title=page.title())
    page.screenshot(path=shot, full_page=True)
    token = page.evaluate("() => localStorage.token")
    auth = {"Authorization": f"Bearer {token}"}
    chats = page.request.get(url + "/api/v1/chats/", headers=auth).json()
    chat = page.request.get(url + "/api/v1/chats/" + chats[0]["id"], headers=auth).json()
    open(chat_file, "w").write(json.dumps(chat))
    step("stored_chat", chats=len(chats))
    browser.close()
'''


def stored_replies(chat: dict) -> list[tuple[str, list[dict]]]:
    """The assistant messages of Open WebUI's stored chat, in order: (content, [{"name", "url"}, ...])."""
    history = chat.get("chat", {}).get("history", {})
    messages, at, chain = history.get("messages", {}), history.get("currentId"), []
    while at and at in messages and len(chain) <= len(messages):  # the current branch, newest first
        chain.append(messages[at])
        at = messages[at].get("parentId")
    replies = []
    for message in reversed(chain):
        if message.get("role") == "assistant":
            sources = [{"name": s.get("source", {}).get("name", ""), "url": s.get("source", {}).get("url", "")}
                       for s in message.get("sources") or []]
            replies.append((message.get("content", ""), sources))
    return replies


def start_servers(args: argparse.Namespace, work: Path, procs: list[subprocess.Popen], result: dict) -> str:
    """Steps 1-3: Open WebUI's venv, the demo index (`make demo`'s folders), `ragsieve serve`, `open-webui serve`;
    the Open WebUI URL."""
    t = time.monotonic()
    ensure_venv(args.venv, work / "install.log")
    result["timings_s"]["venv"] = round(time.monotonic() - t, 1)
    ver = subprocess.run([str(args.venv / "bin" / "python"), "-c",
                          "import importlib.metadata as m; print(m.version('open-webui'))"],
                         capture_output=True, text=True, timeout=120)
    result["open_webui_version"] = ver.stdout.strip()
    ragsieve = Path(sys.executable).parent / "ragsieve"
    index, serve_log, owui_log = work / "index", work / "serve.log", work / "openwebui.log"
    subprocess.run([str(ragsieve), "index", *DEMO_FOLDERS, "--index", str(index)], check=True, cwd=REPO,
                   capture_output=True, timeout=900)
    rport, oport = free_port(), free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.llm_base_url:
        env["RAGSIEVE_BASE_URL"] = args.llm_base_url
    t = time.monotonic()
    serve = subprocess.Popen([str(ragsieve), "serve", "--index", f"demo={index}", "--port", str(rport),
                              "--request-timeout", str(args.answer_timeout), "--llm-parallel", "2"],
                             stdout=open(serve_log, "w"), stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
    procs.append(serve)
    wait_http(f"http://127.0.0.1:{rport}/healthz", 300, serve)
    wait_http(f"http://127.0.0.1:{rport}/readyz", 600, serve)
    result["timings_s"]["ragsieve_ready"] = round(time.monotonic() - t, 1)
    owui_env = dict(env, DATA_DIR=str(work / "owui-data"), WEBUI_AUTH="False", OFFLINE_MODE="True",
                    ENABLE_OLLAMA_API="False", OPENAI_API_BASE_URL=f"http://127.0.0.1:{rport}/v1",
                    OPENAI_API_KEY="not-needed", ENABLE_VERSION_UPDATE_CHECK="False",
                    ANONYMIZED_TELEMETRY="False", SCARF_NO_ANALYTICS="true", DO_NOT_TRACK="true",
                    WEBUI_SECRET_KEY="frontends-benchmark-only", no_proxy="127.0.0.1,localhost")
    t = time.monotonic()
    owui = subprocess.Popen([str(args.venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1",
                             "--port", str(oport)], stdout=open(owui_log, "w"), stderr=subprocess.STDOUT,
                            env=owui_env, cwd=work, start_new_session=True)
    procs.append(owui)
    wait_http(f"http://127.0.0.1:{oport}/health", 900, owui)
    result["timings_s"]["open_webui_ready"] = round(time.monotonic() - t, 1)
    return f"http://127.0.0.1:{oport}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--owui-venv", "--venv", dest="venv", type=Path,
                    default=Path(tempfile.gettempdir()) / "ragsieve-openwebui-venv",
                    help="Open WebUI's own venv (created when it has no open-webui)")
    ap.add_argument("--llm-base-url", default=None, help="an OpenAI-compatible LLM for ragsieve (default: embedded)")
    ap.add_argument("--answer-timeout", type=float, default=600.0, help="seconds per answer in the browser")
    ap.add_argument("--openwebui-url", default=None,
                    help="drive an Open WebUI already running (started as the README says) instead of starting one")
    ap.add_argument("--scripted", action="store_true",
                    help="ragsieve's LLM is benchmarks/scripted_llm.py (citations renumbered while streamed, an "
                         "uncited answer to the off-topic question) instead of the embedded model")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: benchmarks/results/frontends_openwebui[_scripted].json")
    args = ap.parse_args(argv)
    results = REPO / "benchmarks" / "results"
    args.out = args.out or results / ("frontends_openwebui_scripted.json" if args.scripted else "frontends_openwebui.json")
    scripted = ScriptedLLM().__enter__() if args.scripted else None
    if scripted is not None:
        args.llm_base_url = scripted.base_url
    llm = ("benchmarks/scripted_llm.py" if args.scripted else args.llm_base_url and "an OpenAI-compatible endpoint"
           or "the embedded model (qwen2.5-coder-0.5b, llama.cpp on the CPU)")
    result = header() | {"commit": git_commit(), "what": __doc__.split("\n\n")[0], "device": "cpu",
                         "cpus": os.cpu_count(), "llm": llm if not args.openwebui_url else "as the running ragsieve serves",
                         "checks": {}, "timings_s": {}}
    work = Path(tempfile.mkdtemp(prefix="ragsieve-frontends-"))
    serve_log, owui_log = work / "serve.log", work / "openwebui.log"
    procs: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        owui_url = args.openwebui_url.rstrip("/") if args.openwebui_url else start_servers(args, work, procs, result)
        if args.openwebui_url:
            result["open_webui_version"] = httpx.get(owui_url + "/api/version", timeout=30, trust_env=False).json()[
                "version"]
        shot = args.out.with_suffix(".png")
        t = time.monotonic()
        driver_python = sys.executable if importlib.util.find_spec("playwright") else str(args.venv / "bin" / "python")
        chat_file = work / "stored-chat.json"
        drive = subprocess.run([driver_python, "-c", DRIVER, owui_url, "demo",
                                json.dumps(QUESTIONS), str(args.answer_timeout), json.dumps(CHROMIUM_FLAGS), str(shot),
                                str(work / "driver-steps.jsonl"), str(chat_file)],
                               capture_output=True, text=True, timeout=len(QUESTIONS) * args.answer_timeout + 600)
        result["timings_s"]["browser"] = round(time.monotonic() - t, 1)
        steps = [json.loads(ln) for ln in drive.stdout.splitlines() if ln.startswith("{")]
        result["browser_steps"] = steps
        if drive.returncode != 0:
            result["browser_error"] = drive.stderr[-3000:]
        answered = [s for s in steps if s["step"] == "answered"]
        title = next((s.get("title", "") for s in steps if s["step"] == "title"), "")
        stored = stored_replies(json.loads(chat_file.read_text())) if chat_file.exists() else []
        shown = [s.get("text", "") for s in answered]
        replies = [Reply(content, sources, shown[i] if i < len(shown) else "")
                   for i, (content, sources) in enumerate(stored)]
        result["replies"] = [{"question": q, "content": r.content[:3000], "sources": r.sources, "cited": r.cited}
                             for q, r in zip(QUESTIONS, replies)]
        per_reply = check_all(replies)
        result["check_details"] = {name: c["per_reply"] for name, c in per_reply.items()}
        result["checks"] = {
            "every_question_answered": len(answered) == len(QUESTIONS) and all(s.get("ok") for s in answered),
            "every_reply_stored": len(stored) == len(QUESTIONS),
            "first_answer_cited": bool(replies) and bool(replies[0].cited),
            **{name: c["passed"] for name, c in per_reply.items()},
            "chat_titled": bool(title) and "New Chat" not in title,
            "no_error_shown": not any(w in text.lower() for text in shown
                                      for w in ("not supported by ragsieve", "error:")),
        }
        if shot.exists():
            result["screenshot"] = str(shot.relative_to(REPO) if shot.is_relative_to(REPO) else shot)
    except Exception as exc:  # recorded, with the step it stopped at
        result["error"] = f"{type(exc).__name__}: {exc}"[:3000]
    finally:
        for proc in reversed(procs):
            stop(proc)
        if scripted is not None:
            scripted.__exit__(None, None, None)
            result["scripted_llm_requests"] = scripted.requests
        if serve_log.exists():
            lines = access_lines(serve_log)
            result["ragsieve_access_log"] = lines[-60:]
            result["requests_by_task"] = {}
            for ln in lines:
                if "/v1/chat/completions" in ln:
                    task = re.search(r"task=(\S+)", ln).group(1)
                    result["requests_by_task"][task] = result["requests_by_task"].get(task, 0) + 1
            result["serve_log_tail"] = serve_log.read_text(errors="replace").splitlines()[-20:]
        if owui_log.exists():
            result["open_webui_log_tail"] = owui_log.read_text(errors="replace").splitlines()[-30:]
        shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    result["passed"] = bool(result["checks"]) and all(result["checks"].values()) and "error" not in result
    print(json.dumps({k: result[k] for k in ("checks", "timings_s", "passed")}, indent=2))
    return write(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
