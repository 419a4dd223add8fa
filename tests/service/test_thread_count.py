"""The embedded model's thread count is chosen once, when the served model starts, and is then applied to
llama.cpp (prompt and generation threads) or refused; a changing machine load never changes it per request.

llama.cpp is replaced by a fake `xllamacpp` whose `Server` records the parameters it was started with and
answers over HTTP on loopback (health and chat completions), so the whole path runs for real: the config, the
registry's preload at start, `open_llm`, `LocalLLMServer`, the `openai` client and the service's routes."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from ragsieve import Config
from ragsieve.agent.errors import UsageError
from ragsieve.service.app import create_app
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.server import ServiceThread
from ragsieve.service.settings import ServiceSettings
from tests.support.stub_openai import StubOpenAI, ok

ANSWER = "The old key stays valid for 24 hours [1]."


class FakeLlamaServer:
    """Stands in for `xllamacpp.Server`: records its parameters and serves /health and the chat API through the
    suite's scripted OpenAI stub (queued replies, a call history)."""

    started: list[dict[str, object]] = []  # the parameters of each server started, in order
    servers: list[StubOpenAI] = []  # each server's stub: its chat requests are the calls it answered

    def __init__(self, params: SimpleNamespace):
        FakeLlamaServer.started.append(
            {"n_threads": params.cpuparams.n_threads, "n_threads_batch": params.cpuparams_batch.n_threads}
        )
        self._stub = StubOpenAI([ok(ANSWER) for _ in range(50)], models=["model.gguf"])
        FakeLlamaServer.servers.append(self._stub)
        self.listening_address = self._stub.base_url.removesuffix("/v1")

    def __del__(self) -> None:  # xllamacpp stops when its Server is deallocated; so does the fake
        self._stub.close()


def fake_xllamacpp() -> SimpleNamespace:
    def params() -> SimpleNamespace:
        return SimpleNamespace(
            model=SimpleNamespace(path=""), cpuparams=SimpleNamespace(n_threads=-1), cpuparams_batch=SimpleNamespace(n_threads=-1)
        )

    return SimpleNamespace(
        CommonParams=params, Server=FakeLlamaServer, llama_pooling_type=SimpleNamespace(LLAMA_POOLING_TYPE_MEAN=1)
    )


@pytest.fixture
def fake_llama(monkeypatch, tmp_path) -> Path:
    """A GGUF path for `[llm] local_model` and the fake llama.cpp behind it; 2 cores, load set by the test."""
    FakeLlamaServer.started, FakeLlamaServer.servers = [], []
    monkeypatch.setattr("ragsieve.agent.llm.local_server.require", lambda *a, **k: fake_xllamacpp())
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


def config_file(tmp_path: Path, gguf: Path, extra: str = "") -> Path:
    path = tmp_path / "ragsieve.toml"
    path.write_text(f'[llm]\nlocal_model = "{gguf}"\nmax_attempts = 1\n{extra}', encoding="utf-8")
    return path


def ask_three_times_under_changing_load(examples_index: Path, config: Config, monkeypatch) -> None:
    """Serve with the model started at start-up (load 0.0), then ask three questions at loads 0, 1.4 and 16."""
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    registry = IndexRegistry({"demo": examples_index}, config)
    settings = ServiceSettings(port=0)
    app = create_app(registry, settings, None, preload_model=True)
    try:
        with ServiceThread(app, settings, lifetime_s=120) as svc:
            with httpx.Client(base_url=svc.base_url, timeout=60, trust_env=False) as client:
                for _ in range(600):  # /readyz: the indexes are warm and the model has started (bounded wait)
                    if client.get("/readyz").status_code == 200:
                        break
                    threading.Event().wait(0.1)
                assert client.get("/readyz").status_code == 200
                for load in (0.0, 1.4, 16.0):
                    monkeypatch.setattr("os.getloadavg", lambda load=load: (load, load, load))
                    reply = client.post(
                        "/v1/chat/completions",
                        json={"model": "demo:fast", "messages": [{"role": "user", "content": "How long is the old key valid?"}]},
                    )
                    assert reply.status_code == 200, reply.text
    finally:
        registry.close()
    servers = FakeLlamaServer.servers  # one server; it answered the warm-up and each question
    assert len(servers) == 1 and len(servers[0].chat_requests()) >= 4


def test_the_thread_count_is_chosen_once_at_start_from_the_load(examples_index, fake_llama, tmp_path, monkeypatch):
    config = Config.load(config_file(tmp_path, fake_llama))
    ask_three_times_under_changing_load(examples_index, config, monkeypatch)
    # one llama.cpp server for the service's life, started at load 0 on 2 cores: 2 threads for prompt and
    # generation, kept while the load rose to 16 (which would have chosen 1)
    assert FakeLlamaServer.started == [{"n_threads": 2, "n_threads_batch": 2}]


def test_a_configured_thread_count_is_applied_whatever_the_load(examples_index, fake_llama, tmp_path, monkeypatch):
    config = Config.load(config_file(tmp_path, fake_llama, "n_threads = 1\n"))
    assert config.llm.n_threads == 1
    ask_three_times_under_changing_load(examples_index, config, monkeypatch)
    assert FakeLlamaServer.started == [{"n_threads": 1, "n_threads_batch": 1}]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("n_threads = 0", "llm.n_threads: Input should be greater than or equal to 1 (got 0)"),
        ("n_threads = -2", "llm.n_threads: Input should be greater than or equal to 1 (got -2)"),
        ('n_threads = "four"', "llm.n_threads: Input should be a valid integer"),
        ("n_threads = 2.5", "llm.n_threads: Input should be a valid integer"),
        ("n_thread = 2", "llm.n_thread: Extra inputs are not permitted"),  # a misspelling is not ignored
    ],
)
def test_a_bad_thread_count_is_refused_in_one_line(fake_llama, tmp_path, line, says):
    with pytest.raises(UsageError) as err:
        Config.load(config_file(tmp_path, fake_llama, line + "\n"))
    message = str(err.value)
    assert says in message and "\n" not in message
    assert FakeLlamaServer.started == []
