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
Checks (`benchmarks/service/frontends_checks.py`): each answer arrives once (not streamed twice), Open WebUI lists
one source per cited anchor (named `[n]`, at its own `#anchor`/`#L..` location, "N Sources" on the page),
an answer that cites nothing says so, and the chat is titled without an error shown.
The result (pass/fail per check, timings, the requests ragsieve saw from Open WebUI per task, commit,
command, load average) goes to `benchmarks/results/frontends_openwebui.json`; a step that cannot run is
recorded with the reason.

    nice -n 10 python -m benchmarks.service.frontends --owui-venv /path/to/owui-venv
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_io import REPO, RESULTS, header, write  # noqa: E402
from benchmarks.pipeline.scripted_llm import ScriptedLLM  # noqa: E402
from benchmarks.service.frontends_checks import Reply, check_all  # noqa: E402
from benchmarks.service.frontends_driver import CHROMIUM_FLAGS, DRIVER, stored_replies  # noqa: E402
from benchmarks.service.frontends_servers import access_lines, start_servers, stop  # noqa: E402

QUESTION = "How do I rotate the API key of a Lumen workspace?"
FOLLOW_UP = "And what happens to the old one after that?"
OFF_TOPIC = "Who wrote the novel Moby-Dick?"  # the documents cannot answer it
QUESTIONS = [QUESTION, FOLLOW_UP, OFF_TOPIC]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--owui-venv",
        "--venv",
        dest="venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ragsieve-openwebui-venv",
        help="Open WebUI's own venv (created when it has no open-webui)",
    )
    ap.add_argument("--llm-base-url", default=None, help="an OpenAI-compatible LLM for ragsieve (default: embedded)")
    ap.add_argument("--answer-timeout", type=float, default=600.0, help="seconds per answer in the browser")
    ap.add_argument(
        "--openwebui-url",
        default=None,
        help="drive an Open WebUI already running (started as the README says) instead of starting one",
    )
    ap.add_argument(
        "--scripted",
        action="store_true",
        help="ragsieve's LLM is benchmarks/pipeline/scripted_llm.py (citations renumbered while streamed, an "
        "uncited answer to the off-topic question) instead of the embedded model",
    )
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/frontends_openwebui[_scripted].json")
    args = ap.parse_args(argv)
    results = RESULTS
    args.out = args.out or results / ("frontends_openwebui_scripted.json" if args.scripted else "frontends_openwebui.json")
    scripted = ScriptedLLM().__enter__() if args.scripted else None
    if scripted is not None:
        args.llm_base_url = scripted.base_url
    llm = (
        "benchmarks/pipeline/scripted_llm.py"
        if args.scripted
        else args.llm_base_url
        and "an OpenAI-compatible endpoint"
        or "the embedded model (qwen2.5-coder-0.5b, llama.cpp on the CPU)"
    )
    result = header() | {
        "what": __doc__.split("\n\n")[0],
        "device": "cpu",
        "cpus": os.cpu_count(),
        "llm": llm if not args.openwebui_url else "as the running ragsieve serves",
        "checks": {},
        "timings_s": {},
    }
    work = Path(tempfile.mkdtemp(prefix="ragsieve-frontends-"))
    serve_log, owui_log = work / "serve.log", work / "openwebui.log"
    procs: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        owui_url = args.openwebui_url.rstrip("/") if args.openwebui_url else start_servers(args, work, procs, result)
        if args.openwebui_url:
            result["open_webui_version"] = httpx.get(owui_url + "/api/version", timeout=30, trust_env=False).json()["version"]
        shot = args.out.with_suffix(".png")
        t = time.monotonic()
        driver_python = sys.executable if importlib.util.find_spec("playwright") else str(args.venv / "bin" / "python")
        chat_file = work / "stored-chat.json"
        drive = subprocess.run(
            [
                driver_python,
                "-c",
                DRIVER,
                owui_url,
                "demo",
                json.dumps(QUESTIONS),
                str(args.answer_timeout),
                json.dumps(CHROMIUM_FLAGS),
                str(shot),
                str(work / "driver-steps.jsonl"),
                str(chat_file),
            ],
            capture_output=True,
            text=True,
            timeout=len(QUESTIONS) * args.answer_timeout + 600,
        )
        result["timings_s"]["browser"] = round(time.monotonic() - t, 1)
        steps = [json.loads(ln) for ln in drive.stdout.splitlines() if ln.startswith("{")]
        result["browser_steps"] = steps
        if drive.returncode != 0:
            result["browser_error"] = drive.stderr[-3000:]
        answered = [s for s in steps if s["step"] == "answered"]
        title = next((s.get("title", "") for s in steps if s["step"] == "title"), "")
        stored = stored_replies(json.loads(chat_file.read_text())) if chat_file.exists() else []
        shown = [s.get("text", "") for s in answered]
        replies = [Reply(content, sources, shown[i] if i < len(shown) else "") for i, (content, sources) in enumerate(stored)]
        result["replies"] = [
            {"question": q, "content": r.content[:3000], "sources": r.sources, "cited": r.cited}
            for q, r in zip(QUESTIONS, replies)
        ]
        per_reply = check_all(replies)
        result["check_details"] = {name: c["per_reply"] for name, c in per_reply.items()}
        result["checks"] = {
            "every_question_answered": len(answered) == len(QUESTIONS) and all(s.get("ok") for s in answered),
            "every_reply_stored": len(stored) == len(QUESTIONS),
            "first_answer_cited": bool(replies) and bool(replies[0].cited),
            **{name: c["passed"] for name, c in per_reply.items()},
            "chat_titled": bool(title) and "New Chat" not in title,
            "no_error_shown": not any(w in text.lower() for text in shown for w in ("not supported by ragsieve", "error:")),
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
