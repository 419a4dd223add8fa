"""Time limits that follow progress: a slow stream completes, a silent one fails fast, keep-alive pings are
not progress, a cancelled question closes its upstream stream, and the embedded model's calls get the time
its measured speed predicts (agent/llm/deadlines.py). Timings are scaled down: the same rules with a
200-token stream at 1 token/s hold because the inactivity timer, not a wall-clock cap, decides."""

from __future__ import annotations

import time

import httpx
import pytest

from ragsieve.agent.errors import BudgetExceeded, EndpointError, LLMError
from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.deadlines import RateMeter, Watchdog
from ragsieve.agent.llm.openai_chat import OpenAIChat
from tests.support.service_fakes import served
from tests.support.slow_sse import SlowStream
from tests.support.stub_openai import StubOpenAI, StubReply, chat_body

MSGS = [{"role": "user", "content": "say something"}]


def chat(url, **kw):
    kw.setdefault("max_attempts", 1)
    kw.setdefault("sleep", lambda s: None)
    return OpenAIChat(url, None, "slow", **kw)


def test_a_stream_longer_than_the_timeout_completes_while_tokens_arrive():
    # 40 tokens, 0.05 s apart: 2 s in all, four times timeout_s. A per-call cap (the old rule) would cut it.
    with SlowStream(tokens=40, interval_s=0.05) as slow:
        got = []
        reply = chat(slow.base_url, timeout_s=0.5).stream(MSGS, on_token=got.append)
    assert len(got) == 40 and reply.text.startswith("t0 t1 ") and reply.finish_reason == "stop"


def test_silence_beyond_the_inactivity_timeout_fails_fast_with_a_clear_message():
    with SlowStream(tokens=1, silence_s=20.0) as slow:
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"no first token for 0.5s \(inactivity timeout\)"):
            chat(slow.base_url, timeout_s=0.5).stream(MSGS, on_token=lambda t: None)
    assert time.monotonic() - started < 5


def test_silence_after_some_tokens_fails_fast_and_says_so():
    with SlowStream(tokens=3, interval_s=10.0) as slow:  # one token, then 10 s of nothing
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"no new token for 0.5s"):
            chat(slow.base_url, timeout_s=0.5).stream(MSGS, on_token=lambda t: None)
    assert time.monotonic() - started < 5


def test_keep_alive_pings_are_not_progress_and_do_not_bypass_the_deadline():
    # hostile re-run item 5: `: ping` comments kept a stream open 91 s under a 20 s limit
    with SlowStream(pings=True, interval_s=0.05) as slow:
        started = time.monotonic()
        llm = LLM(chat(slow.base_url, timeout_s=30.0), budget=QuestionBudget(deadline_s=1.0))
        with pytest.raises(BudgetExceeded, match="deadline"):
            llm.text(MSGS, on_token=lambda t: None)
        assert time.monotonic() - started < 4
        with pytest.raises(LLMError, match="inactivity"):  # and without a deadline, inactivity ends it
            chat(slow.base_url, timeout_s=0.5).stream(MSGS, on_token=lambda t: None)


def test_a_client_leaving_the_service_closes_the_upstream_stream(examples_index):
    # hostile re-run item 5: the upstream stayed open 86 s after the client left
    with (
        SlowStream(pings=True, interval_s=0.05, max_s=60) as slow,
        served({"demo": examples_index}, chat(slow.base_url, timeout_s=60.0)) as svc,
    ):
        with httpx.stream(
            "POST",
            svc.base_url + "/v1/chat/completions",
            timeout=10,
            json={"model": "demo", "stream": True, "messages": [{"role": "user", "content": "How do I rotate a key?"}]},
        ) as r:
            lines = r.iter_lines()
            for line in lines:
                if line.startswith("data:"):
                    break  # the first chunk arrived
            polled = time.monotonic()
            while not slow.served and time.monotonic() - polled < 90:  # the answer call reached upstream
                time.sleep(0.05)
            assert slow.served, "the answer call never reached the upstream"
        # the client went away while the upstream sends only keep-alive comments
        waited = time.monotonic()
        while time.monotonic() - waited < 5 and not (slow.served and slow.served[0].ended):
            time.sleep(0.05)
        assert slow.served and slow.served[0].ended is not None, "upstream still open after the client left"
        assert slow.served[0].ended - waited < 3


def test_the_watchdog_reports_why_it_closed():
    closed = []
    with Watchdog(lambda: closed.append(1), inactivity_s=0.2, tick_s=0.02) as dog:
        time.sleep(0.1)
        dog.token()
        time.sleep(0.5)
    assert closed == [1] and dog.kind == "inactivity" and "no new token for 0.2s" in dog.reason
    closed.clear()
    with Watchdog(lambda: closed.append(1), inactivity_s=0.2, tick_s=0.02) as dog:
        dog.progress()  # an event that is not a token (a role delta, prompt progress): still no first token
        time.sleep(0.5)
    assert closed == [1] and dog.kind == "first_token" and "no first token for 0.2s" in dog.reason
    stop = {"now": False}
    with Watchdog(lambda: None, inactivity_s=10, should_stop=lambda: stop["now"], tick_s=0.02) as dog:
        stop["now"] = True
        time.sleep(0.2)
    assert dog.kind == "cancelled"


def test_rates_from_llama_cpp_timings_set_the_call_timeout():
    rates = RateMeter()
    rates.observe_reply(
        {"timings": {"prompt_n": 1000, "prompt_ms": 10_000, "predicted_n": 50, "predicted_ms": 10_000}}, latency_s=20.0
    )
    assert rates.prompt_tps == pytest.approx(100.0) and rates.gen_tps == pytest.approx(5.0)
    # 2,000 prompt tokens at 100/s + 100 tokens at 5/s = 40 s predicted, times the margin of 3
    assert rates.call_timeout(2000, 100, floor_s=120) == pytest.approx(120.0)
    assert rates.call_timeout(20_000, 100, floor_s=120) == pytest.approx(3 * (200 + 20))
    rates.observe_reply({"usage": {"prompt_tokens": 100, "completion_tokens": 10}}, latency_s=4.0)
    assert rates.samples == 2 and rates.prompt_tps < 100.0  # the slower call lowers the estimate


def test_the_embedded_model_gets_the_time_its_measured_speed_predicts():
    prompt = [{"role": "user", "content": "word " * 200}]
    body = chat_body("done", prompt_tokens=200, completion_tokens=1)
    with StubOpenAI([StubReply(200, body, delay_s=1.0), StubReply(200, body, delay_s=1.0)]) as stub:
        fixed = OpenAIChat(stub.base_url, None, "m", timeout_s=0.4, max_attempts=1, sleep=lambda s: None)
        with pytest.raises(EndpointError, match="after 1 attempt"):
            fixed.complete(prompt, max_tokens=1)
        adaptive = OpenAIChat(
            stub.base_url, None, "m", timeout_s=0.4, max_attempts=1, sleep=lambda s: None, adaptive_timeouts=True
        )
        adaptive.rates.observe(prompt_n=100, prompt_s=1.0, gen_n=10, gen_s=1.0)  # measured: 100 prompt tokens/s
        assert adaptive.call_timeout(200, 1) > 1.0
        assert adaptive.complete(prompt, max_tokens=1).text == "done"
