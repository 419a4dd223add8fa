"""Operability and the hostile re-run's service items: an access-log line per request, the header naming a
ragsieve server (refused as an LLM), `curl -d` JSON accepted, an oversized system message is the caller's
fault (4xx), the CLI fails when the budget stopped a question before any answer, idle connections do not
deny service."""

from __future__ import annotations

import logging
import socket
import time

import httpx
import pytest

from ragsieve.agent.config import Config
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.openai_chat import OpenAIChat
from ragsieve.cli.main import main
from ragsieve.service.app import create_app
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.server import ServiceThread
from ragsieve.service.settings import ServiceSettings
from ragsieve.testing import FakeChat
from tests.support.service_fakes import served
from tests.support.stub_openai import StubOpenAI, StubReply, chat_body

QUESTION = {"model": "demo", "messages": [{"role": "user", "content": "How do I rotate a key?"}]}


def test_one_access_log_line_per_request_with_model_status_and_stages(examples_index, caplog):
    with served({"demo": examples_index}) as svc, caplog.at_level(logging.INFO, logger="ragsieve.access"):
        r = httpx.post(svc.base_url + "/v1/chat/completions", json=QUESTION, timeout=60, headers={"x-request-id": "req-42"})
        httpx.get(svc.base_url + "/healthz", timeout=10)
        time.sleep(0.2)
    assert r.status_code == 200 and r.headers["x-request-id"] == "req-42" and r.headers["x-ragsieve-server"]
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "ragsieve.access"]
    chat = [ln for ln in lines if "/v1/chat/completions" in ln]
    assert len(chat) == 1 and len([ln for ln in lines if "/healthz" in ln]) == 1
    assert "id=req-42" in chat[0] and "model=demo" in chat[0] and "status=200" in chat[0]
    assert "retrieve:" in chat[0] and "answer:" in chat[0]


def test_a_ragsieve_server_is_refused_as_the_llm(examples_index):
    with served({"demo": examples_index}) as svc:
        chat = OpenAIChat(svc.base_url + "/v1", None, None, max_attempts=1)
        with pytest.raises(UsageError, match="is a ragsieve server"):
            chat.complete([{"role": "user", "content": "hi"}])
        chat = OpenAIChat(svc.base_url + "/v1", None, "demo", max_attempts=1)
        with pytest.raises(UsageError, match="is a ragsieve server"):
            chat.complete([{"role": "user", "content": "hi"}])
        with pytest.raises(UsageError, match="is a ragsieve server"):
            chat.stream([{"role": "user", "content": "hi"}], on_token=lambda t: None)


def test_curl_style_form_content_type_is_read_as_json(examples_index):
    # hostile re-run item 14: `curl -d '{...}'` (form content type) got 400 from /v1/ask
    with served({"demo": examples_index}) as svc:
        r = httpx.post(
            svc.base_url + "/v1/ask",
            content=b'{"question": "How do I rotate the API key?"}',
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        assert r.json()["answer"]
        bad = httpx.post(
            svc.base_url + "/v1/ask",
            content=b"question=hi",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=60,
        )
        assert bad.status_code == 400


def test_an_oversized_system_message_is_a_4xx_not_an_upstream_error(examples_index):
    # hostile re-run item 13: 502 upstream_error for the caller's own oversized prompt
    registry = IndexRegistry({"demo": examples_index}, Config(), llm=LLM(FakeChat(default="Rotate [1]."), max_prompt_tokens=2000))
    app = create_app(registry, ServiceSettings(port=0), preload_model=False)
    try:
        with ServiceThread(app, lifetime_s=120) as svc:
            body = QUESTION | {"messages": [{"role": "system", "content": "be precise " * 3000}] + QUESTION["messages"]}
            r = httpx.post(svc.base_url + "/v1/chat/completions", json=body, timeout=60)
    finally:
        registry.close()
    assert r.status_code == 400 and r.json()["error"]["code"] == "prompt_too_large"


def test_the_cli_fails_when_the_budget_stops_a_question_before_any_answer(examples_index, capsys):
    # hostile re-run item 12: exit 0 with an empty answer
    with StubOpenAI([StubReply(200, chat_body("late [1]"), delay_s=3.0)]) as stub:
        code = main(
            [
                "ask",
                "How do I rotate the API key?",
                "--index",
                str(examples_index),
                "--base-url",
                stub.base_url,
                "--deadline",
                "0.5",
            ]
        )
    assert code == 3
    out = capsys.readouterr()
    assert "no answer" in out.err and "not an answer" in out.out  # the closest passages, marked, still shown


def test_idle_connections_do_not_deny_service(examples_index):
    # hostile re-run item 2: ~1,000 idle sockets made every route 503 (uvicorn counted them as busy)
    with served({"demo": examples_index}, max_connections=16, idle_timeout_s=1.0) as svc:
        idle = [socket.create_connection(("127.0.0.1", svc.port)) for _ in range(40)]
        try:
            assert httpx.get(svc.base_url + "/healthz", timeout=10).status_code == 200
            r = httpx.post(svc.base_url + "/v1/chat/completions", json=QUESTION, timeout=60)
            assert r.status_code == 200
            time.sleep(2.0)  # silent connections are closed after idle_timeout_s
            closed = 0
            for s in idle:
                s.settimeout(1.0)
                try:
                    closed += s.recv(1) == b""
                except ConnectionResetError:
                    closed += 1
                except socket.timeout:  # still open
                    pass
            assert closed == len(idle)
        finally:
            for s in idle:
                s.close()


def test_readyz_waits_for_the_warm_up_search(examples_index):
    """With start-up preloading, /readyz says ready only after each index has run one search, so the first
    real search does not load the query encoder or the index structures (issue 44)."""
    import threading

    registry = IndexRegistry({"demo": examples_index}, Config(), llm=LLM(FakeChat(default="Rotate [1].")))
    gate, warm = threading.Event(), registry.warm_indexes
    registry.warm_indexes = lambda: (gate.wait(60), warm())  # type: ignore[method-assign]
    app = create_app(registry, ServiceSettings(port=0))
    try:
        with ServiceThread(app, lifetime_s=120) as svc:
            waiting = httpx.get(svc.base_url + "/readyz", timeout=30)
            assert waiting.status_code == 503 and waiting.json()["indexes"] == {"demo": False}
            gate.set()
            deadline = time.monotonic() + 60
            while httpx.get(svc.base_url + "/readyz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "never ready"
                time.sleep(0.05)
            assert registry.warmed == {"demo"}
            index = registry.orchestrators["demo"].index
            assert "ragsieve warm-up" in index._query_cache  # the encoder ran once before ready
    finally:
        gate.set()
        registry.close()
