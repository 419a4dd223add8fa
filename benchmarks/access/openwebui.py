"""docs/access.md's "Who sees what" with a real Open WebUI forwarding its signed-in users to `ragsieve serve`.

Steps, each bounded in time, every server on 127.0.0.1 (issue 48's done-when, the Open WebUI part):
1. a corpus with a needle (`finance/halcyon.md`, readable only by `group:finance` through an access rules
   file) and public documents, indexed with `--access-default deny`;
2. `ragsieve serve` with a keys file: Open WebUI's key `assert_identity = true`, `trusted_proxies` 127.0.0.1/32,
   a key without identity rights, an administrator key; the LLM is `benchmarks/pipeline/scripted_llm.py`,
   quoting each passage it is given (so any text that reached the prompt reaches the answer);
3. Open WebUI (`--owui-venv`, 0.12.4) with auth on, `ENABLE_FORWARD_USER_INFO_HEADERS=true`,
   `BYPASS_MODEL_ACCESS_CONTROL=true` (so plain users see the connection's models), offline settings as
   `benchmarks/service/frontends.py`; accounts made through its API: the first sign-up (admin), then, by the admin,
   fin@example.com and bob@example.com (role user); an Open WebUI group `finance` holding fin, and the
   connection's header `X-Forwarded-Groups: {{USER_GROUPS}}` (Open WebUI fills in the user's group names);
4. as fin, bob and the admin: the question through Open WebUI's chat API (`/api/chat/completions`); as fin and
   bob also through headless Chromium (frontends.py's driver, signed in with the user's token), then the chat
   Open WebUI stored; fin's answer must cite the needle; nothing bob (or the admin, who is in no group)
   receives, is shown or Open WebUI stores may name it; carol, in a group named "Finance Team" (read as
   `group:finance-team`, which the needle's rule does not name), gets an answer without a trace of the needle;
5. straight to ragsieve: forwarded identity headers from 127.0.0.2 (not a trusted proxy), or from 127.0.0.1
   with a key without `assert_identity`, get 403; Open WebUI's key without headers reads public documents only.
The result goes to `benchmarks/results/access-openwebui.json`.

    nice -n 10 .venv/bin/python -m benchmarks.access.openwebui --owui-venv /work/owui/venv
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]

from benchmarks.bench_io import header, write  # noqa: E402
from benchmarks.pipeline.scripted_llm import ScriptedLLM, quoting_reply  # noqa: E402
from benchmarks.service.frontends_driver import CHROMIUM_FLAGS, DRIVER, stored_replies  # noqa: E402
from benchmarks.service.frontends_servers import access_lines, free_port, git_commit, stop, wait_http  # noqa: E402

QUESTION = "What acquisition price was agreed for the takeover, and when does it close?"
NEEDLE = ("# Halcyon takeover budget\n\nThe acquisition price agreed for the Halcyon takeover is 41.7 million euros "
          "(deal code HX-7731); it closes on 30 June.\n")
NEEDLE_MARKS = ("halcyon", "41.7", "hx-7731", "finance/")  # text, title, path: none may reach bob
PUBLIC = {
    "docs/takeovers.md": "# Takeovers\n\nEvery acquisition price is agreed by the board before the takeover "
                         "closes; staff learn the price when the deal is announced.\n",
    "docs/holidays.md": "# Holidays\n\nStaff take 25 days of holiday a year; ask your manager two weeks ahead.\n",
}
RULES = "docs/**   public\nfinance/  group:finance\n"
KEYS = """[keys]
"sk-admin-bench" = ["*"]

[keys."sk-openwebui"]
indexes = ["idx"]
principals = []
assert_identity = true

[keys."sk-plain"]
indexes = ["idx"]
principals = []

[identity]
trusted_proxies = ["127.0.0.1/32"]
"""
USERS = {"fin": "fin@example.com", "bob": "bob@example.com"}
SPACED = "carol@example.com"  # in an Open WebUI group named "Finance Team": group:finance-team
PASSWORD = "Bench-only-Passw0rd!"


def leaks(text: str) -> list[str]:
    low = text.lower()
    return [m for m in NEEDLE_MARKS if m in low]


def make_index(work: Path, ragsieve: Path) -> str:
    corpus = work / "corpus"
    for rel, text in {**PUBLIC, "finance/halcyon.md": NEEDLE}.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text)
    (corpus / "access.rules").write_text(RULES)
    out = subprocess.run([str(ragsieve), "index", "docs/", "finance/", "--index", str(work / "idx"),
                          "--access-rules", "access.rules", "--access-default", "deny"],
                         cwd=corpus, capture_output=True, text=True, timeout=900, check=True)
    return (out.stdout + out.stderr).strip()[-600:]


def owui_api(url: str, path: str, token: str | None, body: dict | None = None, timeout: float = 120) -> dict:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.post(url + path, json=body, headers=auth, timeout=timeout, trust_env=False) if body is not None else \
        httpx.get(url + path, headers=auth, timeout=timeout, trust_env=False)
    if r.status_code >= 400:
        raise RuntimeError(f"Open WebUI {path}: {r.status_code} {r.text[:300]}")
    return r.json()


def accounts(url: str, rport: int) -> dict[str, str]:
    """The admin's sign-up (the first becomes admin), fin and bob added by the admin, a group `finance` holding
    fin, and the connection forwarding each user's groups; each user's token."""
    admin = owui_api(url, "/api/v1/auths/signup", None, {"name": "Admin", "email": "admin@example.com",
                                                         "password": PASSWORD})
    tokens, ids = {"admin": admin["token"]}, {}
    for name, email in {**USERS, "carol": SPACED}.items():
        owui_api(url, "/api/v1/auths/add", admin["token"], {"name": name.title(), "email": email,
                                                            "password": PASSWORD, "role": "user"})
        signed = owui_api(url, "/api/v1/auths/signin", None, {"email": email, "password": PASSWORD})
        tokens[name], ids[name] = signed["token"], signed["id"]
    group = owui_api(url, "/api/v1/groups/create", admin["token"], {"name": "finance", "description": "bench"})
    owui_api(url, f"/api/v1/groups/id/{group['id']}/users/add", admin["token"], {"user_ids": [ids["fin"]]})
    spaced = owui_api(url, "/api/v1/groups/create", admin["token"], {"name": "Finance Team", "description": "b"})
    owui_api(url, f"/api/v1/groups/id/{spaced['id']}/users/add", admin["token"], {"user_ids": [ids["carol"]]})
    owui_api(url, "/openai/config/update", admin["token"], {
        "ENABLE_OPENAI_API": True, "OPENAI_API_BASE_URLS": [f"http://127.0.0.1:{rport}/v1"],
        "OPENAI_API_KEYS": ["sk-openwebui"],
        "OPENAI_API_CONFIGS": {"0": {"headers": {"X-Forwarded-Groups": "{{USER_GROUPS}}"}}}})
    return tokens


def browser(url: str, token: str, work: Path, name: str, venv: Path, timeout_s: float, shot: Path) -> dict:
    """frontends.py's driver, signed in as the user: what the page showed and the chat Open WebUI stored."""
    python = sys.executable if importlib.util.find_spec("playwright") else str(venv / "bin" / "python")
    chat_file = work / f"chat-{name}.json"
    drive = subprocess.run([python, "-c", DRIVER, url, "idx", json.dumps([QUESTION]), str(timeout_s),
                            json.dumps(CHROMIUM_FLAGS), str(shot), str(work / f"steps-{name}.jsonl"),
                            str(chat_file), token], capture_output=True, text=True, timeout=timeout_s + 600)
    steps = [json.loads(ln) for ln in drive.stdout.splitlines() if ln.startswith("{")]
    shown = next((s.get("text", "") for s in steps if s["step"] == "answered"), "")
    stored = chat_file.read_text() if chat_file.exists() else ""
    replies = stored_replies(json.loads(stored)) if stored else []
    return {"shown": shown, "stored_chat_chars": len(stored), "stored_raw": stored,
            "stored_reply": replies[0][0] if replies else "", "stored_sources": replies[0][1] if replies else [],
            "screenshot": str(shot.relative_to(REPO)) if shot.is_relative_to(REPO) and shot.exists() else None,
            "error": drive.stderr[-1500:] if drive.returncode else None}


def direct_refusals(rport: int) -> dict:
    """Forwarded headers straight to ragsieve: from 127.0.0.2 with Open WebUI's key, from 127.0.0.1 with a key
    without identity rights; and Open WebUI's key with no identity headers (public documents only)."""
    body = {"model": "idx", "messages": [{"role": "user", "content": QUESTION}]}
    forged = {"X-OpenWebUI-User-Email": USERS["fin"], "X-OpenWebUI-User-Role": "user", "X-Forwarded-Groups": "finance"}
    out = {}
    for case, source, key, sent in (("untrusted_address", "127.0.0.2", "sk-openwebui", forged),
                                    ("key_without_assert_identity", "127.0.0.1", "sk-plain", forged),
                                    ("openwebui_key_no_headers", "127.0.0.1", "sk-openwebui", {})):
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, trust_env=False, timeout=300) as client:
            r = client.post(f"http://127.0.0.1:{rport}/v1/chat/completions", json=body,
                            headers={"Authorization": f"Bearer {key}", **sent})
        out[case] = {"status": r.status_code, "body": r.text[:300], "leaks": leaks(r.text)}
    return out


def run(args: argparse.Namespace, work: Path, procs: list[subprocess.Popen], result: dict, llm_url: str) -> None:
    ragsieve = Path(sys.executable).parent / "ragsieve"
    result["index_summary"] = make_index(work, ragsieve)
    (work / "keys.toml").write_text(KEYS)
    rport, oport = free_port(), free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGSIEVE_BASE_URL=llm_url)
    serve = subprocess.Popen([str(ragsieve), "serve", "--index", f"idx={work / 'idx'}", "--host", "127.0.0.1",
                              "--port", str(rport), "--keys-file", str(work / "keys.toml")],
                             stdout=open(work / "serve.log", "w"), stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
    procs.append(serve)
    wait_http(f"http://127.0.0.1:{rport}/readyz", 600, serve)
    result["direct"] = direct_refusals(rport)
    owui_env = dict(env, DATA_DIR=str(work / "owui-data"), WEBUI_AUTH="True", OFFLINE_MODE="True",
                    ENABLE_FORWARD_USER_INFO_HEADERS="true", BYPASS_MODEL_ACCESS_CONTROL="true",
                    ENABLE_OLLAMA_API="False", OPENAI_API_BASE_URL=f"http://127.0.0.1:{rport}/v1",
                    OPENAI_API_KEY="sk-openwebui", ENABLE_VERSION_UPDATE_CHECK="False",
                    ANONYMIZED_TELEMETRY="False", SCARF_NO_ANALYTICS="true", DO_NOT_TRACK="true",
                    WEBUI_SECRET_KEY="access-benchmark-only", no_proxy="127.0.0.1,localhost")
    owui = subprocess.Popen([str(args.venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1",
                             "--port", str(oport)], stdout=open(work / "openwebui.log", "w"),
                            stderr=subprocess.STDOUT, env=owui_env, cwd=work, start_new_session=True)
    procs.append(owui)
    url = f"http://127.0.0.1:{oport}"
    wait_http(url + "/health", 900, owui)
    result["open_webui_version"] = owui_api(url, "/api/version", None)["version"]
    tokens = accounts(url, rport)
    for name in (*USERS, "admin"):
        user: dict = {"email": USERS.get(name, "admin@example.com")}
        models = owui_api(url, "/api/models", tokens[name])
        user["models_seen"] = [m["id"] for m in models.get("data", [])]
        api = owui_api(url, "/api/chat/completions", tokens[name],
                       {"model": "idx", "stream": False, "messages": [{"role": "user", "content": QUESTION}]},
                       timeout=args.answer_timeout)
        api_text = json.dumps(api)
        user["api_answer"] = str(api.get("choices", [{}])[0].get("message", {}).get("content", ""))[:1500]
        user["api_cites_needle"] = "finance/halcyon.md" in user["api_answer"] and "41.7 million" in user["api_answer"]
        user["api_leaks"] = leaks(api_text)
        if not args.no_browser and name in USERS:
            seen = browser(url, tokens[name], work, name, args.venv, args.answer_timeout,
                           args.out.with_name(f"{args.out.stem}-{name}.png"))
            raw = seen.pop("stored_raw")
            user["browser"] = seen
            user["browser_cites_needle"] = ("41.7 million" in seen["shown"] and "finance/halcyon.md" in
                                            json.dumps(seen["stored_sources"]))
            user["browser_leaks"] = sorted(set(leaks(raw) + leaks(seen["shown"])))
        result["users"][name] = user
    r = httpx.post(url + "/api/chat/completions", headers={"Authorization": f"Bearer {tokens['carol']}"},
                   json={"model": "idx", "stream": False, "messages": [{"role": "user", "content": QUESTION}]},
                   timeout=args.answer_timeout, trust_env=False)
    result["users"]["carol"] = {"email": SPACED, "open_webui_group": "Finance Team", "api_status": r.status_code,
                                "api_body": r.text[:600], "api_leaks": leaks(r.text)}
    lines = access_lines(work / "serve.log")
    result["ragsieve_access_log"] = lines[-30:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--owui-venv", dest="venv", type=Path, default=Path("/work/owui/venv"),
                    help="a venv with open-webui installed (not created here)")
    ap.add_argument("--answer-timeout", type=float, default=300.0)
    ap.add_argument("--no-browser", action="store_true", help="Open WebUI's chat API only")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "access-openwebui.json")
    args = ap.parse_args(argv)
    result = header() | {"commit": git_commit(), "what": __doc__.split("\n\n")[0], "device": "cpu",
                         "cpus": os.cpu_count(), "llm": "benchmarks/pipeline/scripted_llm.py (quoting_reply: quotes each passage)", "users": {}}
    work = Path(tempfile.mkdtemp(prefix="ragsieve-access-owui-"))
    procs: list[subprocess.Popen] = []
    started = time.monotonic()
    with ScriptedLLM(quoting_reply) as llm:
        try:
            run(args, work, procs, result, llm.base_url)
        except Exception as exc:  # recorded with what ran so far
            result["error"] = f"{type(exc).__name__}: {exc}"[:3000]
        finally:
            for proc in reversed(procs):
                stop(proc)
            for log in ("serve.log", "openwebui.log"):
                if (work / log).exists():
                    result[log.replace(".", "_") + "_tail"] = (work / log).read_text(errors="replace").splitlines()[-15:]
    fin, bob, admin, carol = (result["users"].get(n, {}) for n in ("fin", "bob", "admin", "carol"))
    direct = result.get("direct", {})
    result["checks"] = {
        "fin_api_cites_needle": bool(fin.get("api_cites_needle")),
        "bob_api_no_needle": "api_leaks" in bob and not bob["api_leaks"],
        "bob_api_answered_from_public": "docs/takeovers.md" in bob.get("api_answer", ""),
        "admin_api_no_needle": "api_leaks" in admin and not admin["api_leaks"],
        "carol_group_with_space_answered_no_needle": carol.get("api_status") == 200 and not carol["api_leaks"],
        "direct_untrusted_address_403": direct.get("untrusted_address", {}).get("status") == 403,
        "direct_key_without_assert_identity_403": direct.get("key_without_assert_identity", {}).get("status") == 403,
        "direct_openwebui_key_alone_public_only": direct.get("openwebui_key_no_headers", {}).get("status") == 200
        and not direct["openwebui_key_no_headers"]["leaks"],
        "refusals_name_no_needle": bool(direct) and all(not c["leaks"] for c in direct.values()),
    }
    if not args.no_browser:
        result["checks"] |= {"fin_browser_cites_needle": bool(fin.get("browser_cites_needle")),
                             "bob_browser_no_needle": "browser_leaks" in bob and not bob["browser_leaks"]
                             and bool(bob.get("browser", {}).get("stored_chat_chars"))}
    result["seconds"] = round(time.monotonic() - started, 1)
    result["passed"] = all(result["checks"].values()) and "error" not in result
    print(json.dumps({"checks": result["checks"], "error": result.get("error"), "passed": result["passed"]}, indent=2))
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    return write(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
