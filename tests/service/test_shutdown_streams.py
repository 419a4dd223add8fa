"""After SIGTERM, `ragsieve serve` ends every stream still open at the end of its graceful-shutdown grace with its
protocol's error event (OpenAI: `data: {"error": ...}` then `data: [DONE]`; native: `event: error`), logs one
line per cut stream and no traceback; a stream that ends within the grace is untouched. The model is a scripted
slow streaming endpoint (tests/support/slow_sse.py): the first answer it streams is short, every later one long."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx

from tests.support.serve_process import serve_process
from tests.support.slow_sse import SlowStream

QUESTION = "How do I rotate the API key of a Lumen workspace?"
GRACE_S = 4.0  # the streams still open are cut just before it: 3 s after SIGTERM


class ShortThenLong(SlowStream):
    """`tokens` is read per request thread: the first request streams `first` tokens, later ones `tokens`."""

    first = 40  # 2 s: ends after SIGTERM, within the grace
    _order = threading.local()
    _count = 0
    _lock = threading.Lock()

    @property  # type: ignore[override]
    def tokens(self) -> int:
        if not hasattr(self._order, "index"):
            with self._lock:
                self._order.index, ShortThenLong._count = ShortThenLong._count, ShortThenLong._count + 1
        return self.first if self._order.index == 0 else self.long

    @tokens.setter
    def tokens(self, value: int) -> None:
        self.long = value


def _read(client: httpx.Client, path: str, body: dict, out: dict, key: str) -> None:
    try:
        with client.stream("POST", path, json=body) as r:
            out[key] = r.status_code, "".join(r.iter_text())
    except httpx.HTTPError as exc:  # the connection was cut: no event at all
        out[key] = None, repr(exc)


def _sse(text: str) -> list[tuple[str, str]]:
    events = []
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        name = next((x[7:] for x in lines if x.startswith("event: ")), "message")
        data = "\n".join(x[6:] for x in lines if x.startswith("data: "))
        if data:
            events.append((name, data))
    return events


def test_sigterm_ends_open_streams_with_error_events(examples_index, tmp_path):
    with ShortThenLong(tokens=2000, interval_s=0.05, max_s=60) as upstream:
        env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "up"}
        out: dict[str, tuple] = {}
        args = ("--max-concurrent", "2", "--shutdown-grace", str(GRACE_S), "--data-dir", str(tmp_path / "data"))
        with serve_process(examples_index, *args, env=env) as (proc, base):
            client = httpx.Client(base_url=base, timeout=60)
            deadline = time.monotonic() + 60
            chat = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
            ask = {"question": QUESTION, "index": "demo"}
            askers = []
            for key, path, body, models in [
                ("short", "/v1/chat/completions", chat, 1),  # ends in the grace
                ("running", "/v1/chat/completions", chat, 2),  # cut while streaming
                ("queued", "/v1/ask/stream", ask, 2),  # gets the short one's slot
                ("queued2", "/v1/ask/stream", ask, 2),  # still queued at the cut
            ]:
                askers.append(threading.Thread(target=_read, args=(client, path, body, out, key)))
                askers[-1].start()
                while len(upstream.served) < models and time.monotonic() < deadline:
                    time.sleep(0.05)
            time.sleep(0.3)  # the queued one has reached the admission queue
            proc.send_signal(signal.SIGTERM)
            for t in askers:
                t.join(30)
            assert proc.wait(30) == 0
            stderr = proc.stderr.read()
    assert len(upstream.served) == 3  # one queued question never reached the model
    status, text = out["short"]
    events = _sse(text)
    assert status == 200 and events[-1][1] == "[DONE]" and "error" not in text, text[-500:]
    assert json.loads(events[-2][1])["choices"][0]["finish_reason"] == "stop"
    status, text = out["running"]
    events = _sse(text)
    assert status == 200 and events[-1][1] == "[DONE]", text[-500:]
    error = json.loads(events[-2][1])
    assert error["error"]["code"] == "server_shutting_down" and error["status"] == 503, error
    for key in ("queued", "queued2"):
        status, text = out[key]
        events = _sse(text)
        assert status == 200 and events and events[-1][0] == "error", (key, text[-500:])
        assert json.loads(events[-1][1])["error"]["code"] == "server_shutting_down"
    assert "serving demo at http://127.0.0.1:" in stderr, stderr
    assert "Traceback" not in stderr and "Cancel" not in stderr, stderr
    assert stderr.count("graceful-shutdown grace ran out") == 3, stderr
