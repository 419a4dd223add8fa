"""ragsieve's own routes, health, metrics, load limits, cancellation and the `serve` command."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from ragsieve.agent.errors import EndpointError, UsageError
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.server import check_exposure
from ragsieve.service.settings import ServiceSettings
from ragsieve.testing import FakeChat
from tests.support.serve_process import serve_process
from tests.support.service_fakes import ANSWER, CountingChat, served, sse_events
from tests.support.stub_openai import StubOpenAI, StubReply, ok

QUESTION = "How do I rotate the API key of a Lumen workspace?"


def test_ask_json_and_progress_stream(examples_index):
    chat = FakeChat([ANSWER, EndpointError("endpoint down", base_url="http://x")], default=ANSWER)
    with served({"demo": examples_index}, chat) as svc:
        r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION, "top_k": 2})
        body = r.json()
        assert r.status_code == 200 and body["citations"][0]["number"] == 1
        assert len(body["context"]) == 2  # top_k applied for this request
        assert [e["step"] for e in body["trace"]] == ["retrieve", "answer"] and body["usage"]["calls"] == 1
        r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION})
        assert r.status_code == 502 and "endpoint down" in r.json()["error"]["message"]
        assert httpx.post(svc.base_url + "/ask", json={"question": QUESTION}).status_code == 200  # old route
        with httpx.stream(
            "POST", svc.base_url + "/v1/ask/stream", json={"question": QUESTION, "plan": "fast"}, timeout=60
        ) as resp:
            events = sse_events(resp)
        kinds = [k for k, _ in events]
        assert kinds[0] == "step" and events[0][1]["step"] == "retrieve"
        assert kinds.index("answer") < kinds.index("token") < kinds.index("done")
        tokens = "".join(d["text"] for k, d in events if k == "token")
        assert tokens == events[-1][1]["answer"]
        for bad, what in (
            ({"question": "  "}, "empty"),
            ({"question": "q", "plan": "nope"}, "does not exist"),
            ({"question": 3}, "string"),
            ({"question": "q", "extra": 1}, "extra"),
        ):
            r = httpx.post(svc.base_url + "/v1/ask", json=bad)
            assert r.status_code in (400, 404) and what in r.json()["error"]["message"].lower()


def test_health_ready_and_metrics(examples_index):
    with served({"demo": examples_index}) as svc:
        assert httpx.get(svc.base_url + "/healthz").json() == {"status": "ok"}
        ready = httpx.get(svc.base_url + "/readyz")
        assert ready.status_code == 200 and ready.json()["indexes"] == {"demo": True}
        httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION})
        httpx.post(svc.base_url + "/v1/ask", json={"question": ""})
        text = httpx.get(svc.base_url + "/metrics").text
        assert 'ragsieve_requests_total{route="/v1/ask",status="200"} 1.0' in text
        assert 'ragsieve_requests_total{route="/v1/ask",status="400"} 1.0' in text
        assert 'ragsieve_question_seconds_count{plan="fast"} 1.0' in text
        assert 'ragsieve_llm_calls_total{plan="fast"} 1.0' in text
        assert "ragsieve_queue_depth 0.0" in text


def test_queue_limit_answers_429_with_retry_after(examples_index):
    gate = threading.Event()

    def slow(messages):
        gate.wait(30)
        return ANSWER

    with served({"demo": examples_index}, FakeChat(default=slow), max_concurrent=1, queue_limit=1) as svc:
        results = []

        def ask():
            results.append(httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60))

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while sum(1 for r in results if r.status_code == 429) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        gate.set()
        for t in threads:
            t.join(30)
        codes = sorted(r.status_code for r in results)
        assert codes == [200, 200, 429, 429]
        busy = [r for r in results if r.status_code == 429][0]
        assert busy.headers["retry-after"] == "2" and busy.json()["error"]["code"] == "queue_full"
        assert "ragsieve_rejected_total 2.0" in httpx.get(svc.base_url + "/metrics").text


def test_client_disconnect_cancels_the_stream(examples_index):
    long_answer = " ".join(f"word{i}" for i in range(400)) + " [1]"
    chat = CountingChat(default=long_answer, token_delay_s=0.01)
    with served({"demo": examples_index}, chat) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0)
        stream = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}], stream=True)
        got = 0
        for _chunk in stream:
            got += 1
            if got == 5:
                break
        stream.close()
        time.sleep(1.5)
        delivered = chat.delivered
        time.sleep(1.0)
        assert chat.delivered == delivered < 300  # the model's stream stopped soon after the client left
        r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60)  # still serving
        assert r.status_code == 200


def test_public_address_needs_keys_or_a_flag():
    # check_exposure only reads the settings (no socket is opened). Every host outside the loopback list is
    # public (`is_loopback` is an allow-list, so the bind-all address takes the same branch); the public host
    # here is 192.0.2.1 (TEST-NET-1, RFC 5737), not an address of this machine
    with pytest.raises(UsageError, match="without API keys"):
        check_exposure(ServiceSettings(host="192.0.2.1"), KeyRing())
    check_exposure(ServiceSettings(host="192.0.2.1", allow_public_without_keys=True), KeyRing())
    check_exposure(ServiceSettings(host="192.0.2.1"), KeyRing({"key-1234-abcd": {"*"}}))
    check_exposure(ServiceSettings(host="127.0.0.1"), KeyRing())


def _serve_cmd(index, *more):
    return [sys.executable, "-m", "ragsieve", "serve", "--index", f"demo={index}", *more]


def test_serve_command_answers_openai_sdk_and_stops_gracefully(examples_index, tmp_path):
    slow = StubReply(200, ok(ANSWER).body, delay_s=2.0)
    with StubOpenAI([ok(ANSWER), slow]) as upstream:
        env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "up"}
        proc = subprocess.Popen(_serve_cmd(examples_index, "--port", "0"), env=env, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stderr.readline()
            assert "serving demo at http://127.0.0.1:" in line, line
            base = line.split(" at ")[1].split(" ")[0]
            c = openai.OpenAI(base_url=base, api_key="x", max_retries=0, timeout=60)
            deadline = time.monotonic() + 60
            while httpx.get(base.replace("/v1", "/readyz")).status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.2)
            reply = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
            assert "lumen keys rotate" in reply.choices[0].message.content
            in_flight = []
            asker = threading.Thread(
                target=lambda: in_flight.append(
                    c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
                )
            )
            asker.start()
            while len(upstream.chat_requests()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)  # while the second question waits for the (slow) model
            asker.join(30)
            assert in_flight and "lumen keys rotate" in in_flight[0].choices[0].message.content  # finished
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_serve_command_reports_a_busy_loopback_port(examples_index):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = subprocess.run(_serve_cmd(examples_index, "--port", str(port)), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2


def test_serve_command_refuses_a_public_bind_without_keys(examples_index, monkeypatch, capsys):
    """In process, with every way the command opens a socket replaced by a failure: the refusal comes
    before any bind, and no server ever listens beyond loopback in this test. The public host asked for is
    192.0.2.1 (TEST-NET-1, RFC 5737): not an address of this machine, so even a bind that got past every
    guard could not listen."""
    import ragsieve.service.server as server
    from ragsieve.cli.main import main

    def must_not_bind(*args, **kwargs):
        raise AssertionError("serve tried to open a socket for a public address without API keys")

    loopback_bind = socket.socket.bind

    def loopback_only(sock, address, *args):  # any socket, whoever opens it: loopback or nothing
        host = address[0] if isinstance(address, tuple) else address
        if host != "127.0.0.1":
            raise AssertionError(f"a socket tried to bind {address!r} in a test")
        return loopback_bind(sock, address, *args)

    for name in ("bind", "serve_foreground", "serve_workers"):
        monkeypatch.setattr(server, name, must_not_bind)
    monkeypatch.setattr(socket.socket, "bind", loopback_only)
    monkeypatch.delenv("RAGSIEVE_API_KEYS", raising=False)
    code = main(["serve", "--index", f"demo={examples_index}", "--host", "192.0.2.1", "--port", "0"])
    assert code == 2 and "without API keys" in capsys.readouterr().err


def test_a_question_past_its_deadline_in_the_queue_gets_504(examples_index):
    """The first question holds the only thread (blocked before its plan starts, so no deadline of its own can end
    it early on a busy machine); the second is admitted, and once its 1 s deadline has surely passed in the queue
    the first is let go: the second then gets a 504 without running."""
    gate, holding = threading.Event(), threading.Event()
    with served(
        {"demo": examples_index}, FakeChat(default=ANSWER), max_concurrent=1, queue_limit=4, request_timeout_s=1.0
    ) as svc:
        live = svc.registry.orchestrators["demo"]
        real_ask = live.ask

        def held_ask(*args, **kwargs):
            live.ask = real_ask  # only the first question is held
            holding.set()
            gate.wait(120)
            return real_ask(*args, **kwargs)

        live.ask = held_ask
        first = threading.Thread(target=lambda: httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=180))
        first.start()
        result: dict = {}
        second = threading.Thread(
            target=lambda: result.update(r=httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=180))
        )
        try:
            assert holding.wait(120)
            second.start()
            admission = svc.app.state.admission
            for _ in range(1200):  # until the second question is admitted (queued behind the first)
                if admission.admitted >= 2:
                    break
                time.sleep(0.05)
            assert admission.admitted >= 2
            time.sleep(1.5)  # its 1 s deadline, counted from admission, has passed whatever the load
        finally:
            gate.set()
            first.join(180)
            if second.is_alive() or "r" not in result:
                second.join(180)
        r = result["r"]
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"


def test_several_worker_processes(examples_index):
    with StubOpenAI([ok(ANSWER)] * 4) as upstream:
        env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "up"}
        with serve_process(examples_index, "--workers", "2", env=env) as (proc, base):  # its workers: one group
            c = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=60)
            for _ in range(2):
                reply = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
                assert "lumen keys rotate" in reply.choices[0].message.content
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
