"""Time limits that follow the work (issue 44 item 4): a model reading a long prompt is not cut for want of a
first token while it reports progress, a call cut by a time limit is never sent again, the embedded model's
thread count follows the machine's load, and the embedded server answers a warm-up request before it counts
as started. Fakes on loopback (tests/slow_sse.py, tests/stub_openai.py); timings scaled down."""

from __future__ import annotations

import time

import pytest

from ragsieve.agent.errors import EndpointError, LLMError
from ragsieve.agent.llm.local_server import default_threads, warm
from ragsieve.agent.llm.openai_chat import OpenAIChat
from ragsieve.agent.llm.streaming import NoFirstToken
from tests.support.slow_sse import SlowStream
from tests.support.stub_openai import StubOpenAI, StubReply, chat_body

MSGS = [{"role": "user", "content": "say something"}]


def chat(url: str, **kw) -> OpenAIChat:
    kw.setdefault("sleep", lambda s: None)
    return OpenAIChat(url, None, "slow", **kw)


def test_a_role_delta_is_not_a_first_token_and_a_silent_prompt_is_not_sent_twice():
    # llama.cpp sends a role-only delta at once, then nothing while it reads the prompt
    with SlowStream(role_first=True, silence_s=20.0, tokens=1) as slow:
        started = time.monotonic()
        with pytest.raises(NoFirstToken, match=r"no first token for 0.5s .*not sent again"):
            chat(slow.base_url, timeout_s=0.5, max_attempts=4).stream(MSGS, on_token=lambda t: None)
        assert time.monotonic() - started < 5
        assert len(slow.served) == 1  # one request, although four attempts were allowed


def test_progress_events_keep_a_long_prompt_alive_and_the_embedded_server_is_asked_for_them():
    # 24 progress events 0.15 s apart: 3.6 s of prompt reading, over twice the 1.5 s window
    with SlowStream(role_first=True, progress=24, interval_s=0.15, tokens=3) as slow:
        got: list[str] = []
        adaptive = chat(slow.base_url, timeout_s=1.5, max_attempts=1, adaptive_timeouts=True)
        reply = adaptive.stream(MSGS, on_token=got.append)
        assert got == ["t0 ", "t1 ", "t2 "] and reply.text == "t0 t1 t2 "
        assert slow.bodies[-1].get("return_progress") is True
        plain = chat(slow.base_url, timeout_s=5.0, max_attempts=1)  # another endpoint: not asked
        plain.stream(MSGS, on_token=lambda t: None)
        assert "return_progress" not in slow.bodies[-1]


def test_a_plain_call_cut_by_its_time_limit_is_not_sent_again():
    body = chat_body("done", prompt_tokens=10, completion_tokens=1)
    with StubOpenAI([StubReply(200, body, delay_s=2.0), StubReply(200, body)]) as stub:
        with pytest.raises(EndpointError, match="after 1 attempt") as info:
            chat(stub.base_url, timeout_s=0.4, max_attempts=3).complete(MSGS, max_tokens=1)
        assert "timed out" in str(info.value).lower() or "SlowReply" in str(info.value)
        assert len(stub.chat_requests()) == 1


def test_transport_faults_are_still_retried():
    body = chat_body("done", prompt_tokens=10, completion_tokens=1)
    with StubOpenAI([StubReply(503, {"error": {"message": "busy"}}), StubReply(200, body)]) as stub:
        assert chat(stub.base_url, timeout_s=5.0, max_attempts=3).complete(MSGS).text == "done"
        assert len(stub.chat_requests()) == 2


@pytest.mark.parametrize(("load", "expected"), [(0.0, 2), (0.4, 2), (0.6, 1), (1.2, 1), (16.0, 1)])
def test_the_thread_count_follows_the_load(monkeypatch, load, expected):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert default_threads(load) == expected


def test_eight_cores_at_load_three_get_five_threads(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr("os.getloadavg", lambda: (3.2, 1.0, 1.0))
    assert default_threads() == 5


def test_warm_up_sends_one_tiny_completion():
    body = chat_body("OK", prompt_tokens=5, completion_tokens=1)
    with StubOpenAI([StubReply(200, body)]) as stub:
        assert warm(stub.base_url.removesuffix("/v1")) is True
        sent = stub.chat_requests()[0].json
        assert sent["max_tokens"] <= 2 and sent["messages"][0]["role"] == "user"
    assert warm("http://127.0.0.1:9", timeout_s=2.0) is False  # nothing listens: logged, not raised


def test_llm_errors_are_llm_errors():
    assert issubclass(NoFirstToken, LLMError)
