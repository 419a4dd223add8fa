"""The release as a user meets it: sdist and wheel built, the wheel installed into a fresh venv outside the
repository, every surface exercised from a folder outside it (`pytest -m release`; part of `make test`).

One venv per run, outside the repository: CPU torch first (a bare `torch` requirement pulls a multi-GB CUDA
build), then
1. the wheel alone (the lean core): no server, MCP, crawler, plots or ONNX exporter installed; `ragsieve
   serve` and `ragsieve mcp` say which extra they need in one line; every module outside the HTTP service
   imports; `ragsieve index` / `search` / `ask` run on real files (the answer from a scripted
   OpenAI-compatible stub on loopback);
2. `[server]`: `ragsieve serve` on 127.0.0.1 answers `/healthz`, `/v1/models`, a chat completion through the
   real `openai` client, an upload to `/v1/files` into a vector store and a search of it, the chat page and
   the widget script, and a /mcp that names the mcp extra;
3. `[server,mcp]`: every module imports (`pkgutil.walk_packages`), and MCP (`initialize`, `tools/list`, a
   `search` call) answers through the real `mcp` client at /mcp and over stdio (`ragsieve mcp`).
The tests run in file order (each stage's fixture installs more). pip's cache and the machine's package
mirror serve the downloads, so it runs offline. Every server stops by itself: bounded waits, and a kill in
`finally`.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import venv
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import openai
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from tests.conftest import EXAMPLES, REPO
from tests.support.dist_build import build_sdist_and_wheel, copy_tree
from tests.support.release_venv import EXTRAS, SURFACE_PACKAGES, TORCH, Fresh, Server, clean_env
from tests.support.stub_openai import StubOpenAI, ok

pytestmark = [pytest.mark.release, pytest.mark.timeout(1500)]

# never in the core install (the wheel alone): the surfaces and heavy parts are extras. ONNX Runtime is not
# among them: flashrank, a core dependency (the card's reranker), requires it; onnx, the `fast` extra's
# exporter, stays out, so new indexes use the torch encoder.
NOT_IN_CORE = SURFACE_PACKAGES - {"onnxruntime"}
# with [server,mcp]: still none of the other extras' packages
NOT_WITH_SERVER = {
    "trafilatura",
    "matplotlib",
    "onnx",
    "pypdf",
    "python-docx",
    "tree-sitter-language-pack",
    "xllamacpp",
    "pymilvus",
    "ray",
}
ANSWER = "Rotate the key with `lumen keys rotate` [1]; the old key keeps working for a 24-hour grace period [1]."
NOTE = "# Deploy notes\n\nThe zorblax gateway listens on port 7412 and restarts nightly at 03:00.\n"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Fresh:
    """Build, then a fresh venv outside the repository with CPU torch and the wheel alone (the core recorded)."""
    root = tmp_path_factory.mktemp("release")
    assert REPO not in root.parents and REPO != root
    started = time.monotonic()
    sdist, wheel = build_sdist_and_wheel(copy_tree(root / "src"), root / "dist")  # the wheel from the sdist
    shutil.rmtree(root / "src")
    timings = {"build": round(time.monotonic() - started, 1)}
    started = time.monotonic()
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    timings["venv"] = round(time.monotonic() - started, 1)
    (root / "work").mkdir()
    fresh = Fresh(root=root, bin=root / "venv" / "bin", env=clean_env(root / "venv"), wheel=wheel, timings=timings)
    fresh.pip(TORCH, step="torch (CPU)")
    fresh.pip(str(wheel), step="wheel alone")
    fresh.core_packages = fresh.packages()
    for surface in ("serve", "mcp"):
        fresh.core_runs[surface] = fresh.run(str(fresh.bin / "ragsieve"), surface, "--index", "docs=idx", timeout=300)
    fresh.core_walk = fresh.walk()
    return fresh


@pytest.fixture(scope="module")
def with_server(fresh) -> Fresh:
    """The wheel with `[server]` (the issue's service user: no MCP)."""
    fresh.pip(f"{fresh.wheel}[server]", step="extra [server]")
    return fresh


@pytest.fixture(scope="module")
def with_mcp(with_server) -> Fresh:
    fresh = with_server
    fresh.pip(f"{fresh.wheel}[{EXTRAS}]", step=f"extras [{EXTRAS}]")
    print(f"\nrelease venv timings (s): {fresh.timings}")
    return fresh


@pytest.fixture(scope="module")
def docs(fresh) -> Path:
    """A few real files, copied outside the repository (markdown: the core reads it with no extra)."""
    folder = fresh.root / "work" / "docs"
    folder.mkdir()
    for name in ("api-keys.md", "configuration.md", "installation.md", "troubleshooting.md", "webhooks.md"):
        shutil.copy2(EXAMPLES / "docs" / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def index(fresh, docs) -> Path:
    built = fresh.run(str(fresh.bin / "ragsieve"), "index", str(docs), "--index", "idx", timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (fresh.root / "work" / "idx").is_dir()
    return fresh.root / "work" / "idx"


def test_the_wheel_alone_installs_no_surface_package(fresh):
    assert {"openai", "numpy", "faiss-cpu", "sentence-transformers", "torch", "ragsieve"} <= fresh.core_packages
    assert fresh.core_packages & NOT_IN_CORE == set()
    flashrank = fresh.run(str(fresh.bin / "python"), "-m", "pip", "show", "onnxruntime", timeout=120).stdout
    assert "onnxruntime" not in fresh.core_packages or re.search(r"Required-by:.*FlashRank", flashrank)


def test_core_surfaces_name_their_extra_in_one_line(fresh):
    for surface, extra in (("serve", "server"), ("mcp", "mcp")):
        done = fresh.core_runs[surface]
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pip install 'ragsieve[{extra}]'" in lines[0], done.stderr[-2000:]


# modules that are an extra's implementation, imported only behind its check (a missing extra is one line there):
# the backend contract mixins (pytest)
EXTRA_ONLY = {
    ("ragsieve.testing.backends", "ModuleNotFoundError: No module named 'pytest'"),
}


def test_the_core_library_imports_without_any_extra(fresh):
    """Without extras only the HTTP service's modules fail to import, for want of the server and mcp packages."""
    walk = fresh.core_walk
    assert len(walk["imported"]) > 150 and "site-packages" in walk["file"]
    outside_service = {
        m: e for m, e in walk["failed"].items() if not m.startswith("ragsieve.service") and (m, e) not in EXTRA_ONLY
    }
    assert outside_service == {}
    wanted = re.compile(
        r"'ragsieve\[(server|mcp)\]'|No module named '(fastapi|starlette|uvicorn|mcp|"
        r"prometheus_client|python_multipart|multipart)'"
    )
    assert {m: e for m, e in walk["failed"].items() if not wanted.search(e) and (m, e) not in EXTRA_ONLY} == {}


def test_index_search_and_ask_outside_the_repository(fresh, index):
    ragsieve = str(fresh.bin / "ragsieve")
    found = fresh.run(ragsieve, "search", "rotate the API key", "--index", str(index), timeout=300)
    assert found.returncode == 0, found.stderr[-3000:]
    assert "api-keys.md" in found.stdout[:1000]  # among the first hits
    with StubOpenAI([ok(ANSWER)] * 4) as stub:
        asked = fresh.run(
            ragsieve,
            "ask",
            "How do I rotate the API key?",
            "--index",
            str(index),
            "--plan",
            "fast",
            "--base-url",
            stub.base_url,
            "--model",
            "stub-model",
            timeout=300,
        )
        assert asked.returncode == 0, asked.stderr[-3000:]
        assert "lumen keys rotate" in asked.stdout and "api-keys.md" in asked.stdout
        prompt = json.dumps(stub.chat_requests()[0].json)
        assert "grace" in prompt  # the retrieved passage reached the model


def test_serve_with_the_server_extra(with_server, index):
    """[server] alone: the chat API, the documents API, the chat page and widget; /mcp names the mcp extra."""
    fresh = with_server
    assert "mcp" not in fresh.packages(), "run in file order: the mcp extra is installed by a later fixture"
    with StubOpenAI([ok(ANSWER)] * 8) as stub:
        server = Server(fresh, "--index", f"docs={index}", "--base-url", stub.base_url, "--model", "stub-model")
        try:
            base = server.address()
            with httpx.Client(base_url=base, timeout=60) as http:
                assert http.get("/healthz").status_code == 200
                page = http.get("/")
                assert page.status_code == 200 and "text/html" in page.headers["content-type"]
                widget = http.get("/widget.js")
                assert widget.status_code == 200 and "javascript" in widget.headers["content-type"]
                assert len(widget.text) > 50_000 and "attachShadow" in widget.text  # the bundle, DOMPurify inside
                no_mcp = http.post("/mcp", json={})
                assert no_mcp.status_code == 501 and "pip install 'ragsieve[mcp]'" in no_mcp.text
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
            assert {"docs", "docs:fast"} <= {m.id for m in client.models.list()}
            reply = client.chat.completions.create(
                model="docs:fast", messages=[{"role": "user", "content": "How do I rotate the API key?"}]
            )
            assert "lumen keys rotate" in (reply.choices[0].message.content or "")

            store = client.vector_stores.create(name="notes")
            landed = client.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=("deploy-notes.md", NOTE.encode()), poll_interval_ms=200, max_wait_seconds=240
            )
            assert landed.status == "completed", landed.last_error
            assert client.files.retrieve(landed.id).filename == "deploy-notes.md"  # POST /v1/files kept it
            hits = list(client.vector_stores.search(store.id, query="which port does the zorblax gateway use"))
            assert hits and hits[0].filename == "deploy-notes.md" and "7412" in hits[0].content[0].text
        finally:
            server.stop()
        assert any("no MCP" in line and "ragsieve[mcp]" in line for line in server.lines)
        assert not any("Traceback" in line for line in server.lines), "\n".join(server.lines[-60:])


def test_every_module_imports_with_the_extras(with_mcp):
    walk = with_mcp.walk()
    assert with_mcp.packages() & NOT_WITH_SERVER == set()  # [server,mcp] brings none of the other extras
    assert set(walk["failed"].items()) <= EXTRA_ONLY
    assert str(REPO) not in walk["file"] and "site-packages" in walk["file"]
    in_tree = {
        f"ragsieve.{p.relative_to(REPO).with_suffix('').as_posix().replace('/', '.')}".removesuffix(".__init__")
        for top in ("agent", "tools", "prompts")
        for p in (REPO / top).rglob("*.py")
    }
    in_tree |= {
        f"ragsieve.{p.relative_to(REPO / 'ragsieve').with_suffix('').as_posix().replace('/', '.')}".removesuffix(".__init__")
        for p in (REPO / "ragsieve").rglob("*.py")
        if p.parent != REPO / "ragsieve"
    }
    assert in_tree - set(walk["imported"]) == {m for m, _ in EXTRA_ONLY}  # that one needs its extra


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
def test_mcp_over_http(with_mcp, index):
    with StubOpenAI([ok(ANSWER)] * 4) as stub:
        server = Server(with_mcp, "--index", f"docs={index}", "--base-url", stub.base_url, "--model", "stub-model")
        try:
            base = server.address()

            async def over_http() -> None:
                with anyio.fail_after(180):
                    async with streamablehttp_client(base + "/mcp") as (read, write, _):
                        async with ClientSession(read, write) as session:
                            await exercise_mcp(session)

            anyio.run(over_http)
        finally:
            server.stop()
        assert not any("Traceback" in line for line in server.lines), "\n".join(server.lines[-60:])


async def exercise_mcp(session: ClientSession) -> None:
    init = await session.initialize()
    assert init.serverInfo.name
    tools = {t.name for t in (await session.list_tools()).tools}
    assert {"search", "ask", "read", "indexes"} <= tools
    found = await session.call_tool("search", {"query": "rotate the API key", "index": "docs"})
    assert not found.isError and "api-keys.md" in json.dumps([c.model_dump() for c in found.content])


def test_mcp_over_stdio(with_mcp, index):
    fresh = with_mcp
    with StubOpenAI([ok(ANSWER)] * 4) as stub:
        params = StdioServerParameters(
            command=str(fresh.bin / "ragsieve"),
            args=["mcp", "--index", f"docs={index}", "--base-url", stub.base_url, "--model", "stub-model"],
            env=fresh.env,
            cwd=str(fresh.root / "work"),
        )

        async def main() -> None:
            with anyio.fail_after(300):
                async with stdio_client(params) as (read, write):
                    async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=240)) as session:
                        await exercise_mcp(session)

        anyio.run(main)
