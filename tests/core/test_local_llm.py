"""Packaged-model assembly (fake parts, fast) and the real embedded llama.cpp server (marked llm)."""

from __future__ import annotations

import hashlib
import importlib
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest
from pydantic import BaseModel

from ragsieve.agent.config import LLMConfig
from ragsieve.agent.errors import ModelUnavailableError, UsageError
from ragsieve.agent.llm.factory import describe_endpoint, open_llm
from ragsieve.agent.llm.local_server import LocalLLMServer, default_threads
from ragsieve.agent.llm.model_packages import PackagedModel, assemble_model, cache_root, resolve_local_model
from ragsieve.agent.llm.openai_chat import OpenAIChat


def fake_model(tmp_path, monkeypatch, chunks: list[bytes], *, sha: str | None = None, install: bool = True):
    """A PackagedModel whose parts are tiny packages importable from tmp_path/site."""
    site = tmp_path / "site"
    tag = uuid.uuid4().hex[:8]
    names = tuple(f"ragsieve_fake_{tag}_part{i}" for i in range(1, len(chunks) + 1))
    if install:
        for index, (name, chunk) in enumerate(zip(names, chunks), start=1):
            (site / name / "data").mkdir(parents=True)
            (site / name / "__init__.py").write_text("")
            (site / name / "data" / f"part{index:02d}.bin").write_bytes(chunk)
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()
    blob = b"".join(chunks)
    return PackagedModel(f"fake-{tag}", names, len(blob), sha or hashlib.sha256(blob).hexdigest(), "local"), blob


CHUNKS = [b"GGUF" + os.urandom(3000), os.urandom(5000), os.urandom(17)]


def test_assembles_once_and_verifies(tmp_path, monkeypatch):
    model, blob = fake_model(tmp_path, monkeypatch, CHUNKS)
    path = assemble_model(model, cache_dir=tmp_path / "cache")
    assert path == tmp_path / "cache" / "models" / f"{model.name}.gguf"
    assert path.read_bytes() == blob
    sidecar = path.with_name(path.name + ".verified")
    assert model.sha256 in sidecar.read_text()
    mtime = path.stat().st_mtime_ns
    for part in (tmp_path / "site").rglob("part*.bin"):
        part.unlink()  # the cached copy is enough from now on
    assert assemble_model(model, cache_dir=tmp_path / "cache") == path
    assert path.stat().st_mtime_ns == mtime
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".part")]


def test_wrong_hash_is_refused_and_nothing_left(tmp_path, monkeypatch):
    model, _ = fake_model(tmp_path, monkeypatch, CHUNKS, sha="0" * 64)
    with pytest.raises(ModelUnavailableError) as info:
        assemble_model(model, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "expected" in message and "0" * 64 in message and "got" in message
    folder = tmp_path / "cache" / "models"
    assert [p.name for p in folder.iterdir() if not p.name.endswith(".lock")] == []


def test_corrupted_cached_file_is_rebuilt(tmp_path, monkeypatch):
    model, blob = fake_model(tmp_path, monkeypatch, CHUNKS)
    path = assemble_model(model, cache_dir=tmp_path / "cache")
    path.write_bytes(b"X" + blob[1:])  # same size, new mtime: the sidecar no longer vouches for it
    assert assemble_model(model, cache_dir=tmp_path / "cache").read_bytes() == blob


def test_corrupted_cached_file_without_parts_says_expected_vs_got(tmp_path, monkeypatch):
    model, blob = fake_model(tmp_path, monkeypatch, CHUNKS)
    path = assemble_model(model, cache_dir=tmp_path / "cache")
    for part in (tmp_path / "site").rglob("part*.bin"):
        part.unlink()
    path.write_bytes(blob[:-1])
    with pytest.raises(ModelUnavailableError, match=rf"expected {len(blob)} bytes, got {len(blob) - 1}.*ragsieve\[local\]"):
        assemble_model(model, cache_dir=tmp_path / "cache")


def test_missing_parts_name_the_pip_extra(tmp_path, monkeypatch):
    model, _ = fake_model(tmp_path, monkeypatch, CHUNKS, install=False)
    with pytest.raises(ModelUnavailableError, match=r"3 of 3 part packages.*pip install 'ragsieve\[local\]'"):
        assemble_model(model, cache_dir=tmp_path / "cache")


def test_concurrent_assembly_is_safe(tmp_path, monkeypatch):
    model, blob = fake_model(tmp_path, monkeypatch, [os.urandom(200_000) for _ in range(4)])
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: assemble_model(model, cache_dir=tmp_path / "cache"), range(4)))
    assert len(set(paths)) == 1 and paths[0].read_bytes() == blob


def test_resolve_gguf_path_and_unknown_name(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_local_model(str(gguf)) == gguf
    with pytest.raises(ModelUnavailableError, match="neither a packaged model .*qwen2.5-coder-0.5b"):
        resolve_local_model(str(tmp_path / "missing.gguf"))


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGSIEVE_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.delenv("RAGSIEVE_CACHE_DIR")
    assert cache_root() == tmp_path / "x" / "ragsieve"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(cache_root()).endswith(os.path.join(".cache", "ragsieve"))


def test_server_refuses_bad_settings(tmp_path):
    with pytest.raises(ModelUnavailableError, match="not found"):
        LocalLLMServer(tmp_path / "nope.gguf")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="n_parallel"):
        LocalLLMServer(gguf, n_parallel=0)


def test_describe_endpoint(monkeypatch):
    assert "https://api.example.test/v1" in describe_endpoint(LLMConfig(base_url="https://api.example.test/v1"))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert "http://127.0.0.1:9/v1" in describe_endpoint(LLMConfig())
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert "embedded llama.cpp" in describe_endpoint(LLMConfig()) and "qwen2.5-coder-0.5b" in describe_endpoint(LLMConfig())


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class Capital(BaseModel):
    country: str
    capital: str


@pytest.mark.llm
def test_open_llm_embedded_structured_call(capsys):
    started = time.monotonic()
    llm, close = open_llm(LLMConfig(n_ctx=2048, max_tokens=48))
    startup = time.monotonic() - started
    port = urlparse(llm.chat.base_url).port
    try:
        t0 = time.monotonic()
        answer = llm.structured([{"role": "user", "content": "What is the capital of France? Reply as JSON."}], Capital)
        latency = time.monotonic() - t0
    finally:
        close()
    assert "paris" in answer.capital.lower()
    usage = llm.meter.snapshot()
    assert usage.calls >= 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert _port_free(port)
    close()  # idempotent
    with capsys.disabled():
        print(f"\n[local llm] open_llm (assemble check + start) {startup:.2f}s, structured call {latency:.2f}s")


@pytest.mark.llm
def test_two_servers_start_concurrently():
    gguf = resolve_local_model("qwen2.5-coder-0.5b")
    barrier = threading.Barrier(2)

    def start(_):
        barrier.wait(timeout=30)
        return LocalLLMServer(gguf, n_ctx=1024, n_parallel=1)

    with ThreadPoolExecutor(2) as pool:
        servers = list(pool.map(start, range(2)))
    try:
        assert servers[0].port != servers[1].port
        assert servers[0].n_threads == default_threads() >= 1
        for server in servers:
            reply = OpenAIChat(server.base_url, None, None, timeout_s=60).complete(
                [{"role": "user", "content": "Say OK."}], max_tokens=4, temperature=0.0
            )
            assert reply.text.strip() and reply.completion_tokens > 0
    finally:
        for server in servers:
            server.close()
    assert all(_port_free(s.port) and not s.running for s in servers)
