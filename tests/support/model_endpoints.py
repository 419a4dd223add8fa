"""Fake model endpoints on loopback for tests (a helper module, not a test file).

`FakeEmbeddings` answers POST /v1/embeddings like an OpenAI-compatible server:
each text becomes a hashed bag of words (so texts sharing words are similar and
a real search over them works); `faults` are served first, one per request
(status, body, headers, delay); `max_inputs` answers 413 to larger batches,
`max_chars` answers 400 "input is too long" to longer texts, `dimension` /
`nan_at` make replies wrong on purpose. `FakeRerank` answers POST /rerank in the
Cohere shape (or TEI's with `style="tei"`) scoring by shared words. Both bind
127.0.0.1 on a free port, record every request, refuse more than
`max_requests` and stop when closed.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

WORD = re.compile(r"[a-z0-9]+")


def bag_vector(text: str, dimension: int) -> list[float]:
    v = np.zeros(dimension)
    for word in WORD.findall(text.lower()):
        v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % dimension] += 1.0
    v[0] += 0.01  # never the zero vector
    return (v / np.linalg.norm(v)).tolist()


class _Server:
    def __init__(self, max_requests: int):
        self.max_requests = max_requests
        self.requests: list[dict[str, Any]] = []
        self.faults: deque[tuple[int, Any, dict, float]] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fault(self, status: int, body: Any = None, headers: dict | None = None, delay_s: float = 0.0) -> None:
        self.faults.append(
            (status, body if body is not None else {"error": {"message": f"fault {status}"}}, headers or {}, delay_s)
        )

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def answer(self, path: str, payload: Any) -> tuple[int, Any, dict]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = json.loads(raw or b"null")
                except json.JSONDecodeError:
                    payload = None
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "json": payload,
                            "at": time.monotonic(),
                            "authorization": self.headers.get("Authorization"),
                        }
                    )
                    over = len(server.requests) > server.max_requests
                    fault = server.faults.popleft() if server.faults and not over else None
                if over:
                    status, body, headers = 503, {"error": {"message": "too many requests to the fake"}}, {}
                elif fault is not None:
                    status, body, headers, delay = fault
                    if delay and server._closing.wait(delay):
                        return
                else:
                    status, body, headers = server.answer(self.path, payload)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


class FakeEmbeddings(_Server):
    """`gate`: the first replies wait (at most 10 s) until that many requests are in flight at once, so a test
    sees its concurrency without timing; `fail_requests`: request numbers (1-based) answered 503; `in_flight`
    and `peak_in_flight` count the requests being answered."""

    def __init__(
        self,
        dimension: int = 64,
        *,
        max_inputs: int | None = None,
        max_chars: int | None = None,
        nan_at: int | None = None,
        reply_dimension: int | None = None,
        max_requests: int = 500,
        gate: int = 0,
        fail_requests: set[int] | None = None,
    ):
        self.dimension, self.max_inputs, self.max_chars = dimension, max_inputs, max_chars
        self.nan_at, self.reply_dimension = nan_at, reply_dimension
        self.answered = 0
        self.in_flight = self.peak_in_flight = self._seen = 0
        self.fail_requests = set(fail_requests or ())
        self._gate = threading.Barrier(gate) if gate > 1 else None
        self._count_lock = threading.Lock()
        super().__init__(max_requests)

    def answer(self, path: str, payload: Any) -> tuple[int, Any, dict]:
        with self._count_lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self._seen += 1
            number, gate = self._seen, self._gate
        try:
            if gate is not None:
                try:
                    gate.wait(timeout=10.0)  # the first `gate` requests meet here, then the gate opens
                except threading.BrokenBarrierError:
                    pass
                self._gate = None
            if number in self.fail_requests:
                return 503, {"error": {"message": f"fault 503 at request {number}"}}, {}
            return self._embeddings(path, payload)
        finally:
            with self._count_lock:
                self.in_flight -= 1

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def embedded_inputs(self) -> int:
        """Inputs embedded by successful replies."""
        return self.answered

    def _embeddings(self, path: str, payload: Any) -> tuple[int, Any, dict]:
        if not path.endswith("/v1/embeddings") or not isinstance(payload, dict):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        texts = payload.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if self.max_inputs is not None and len(texts) > self.max_inputs:
            return 413, {"error": {"message": f"batch size {len(texts)} > maximum allowed batch size {self.max_inputs}"}}, {}
        if self.max_chars is not None and any(len(t) > self.max_chars for t in texts):
            return 400, {"error": {"message": "input is too long: maximum context length exceeded"}}, {}
        dim = self.reply_dimension or payload.get("dimensions") or self.dimension
        data = [{"object": "embedding", "index": i, "embedding": bag_vector(t, dim)} for i, t in enumerate(texts)]
        if self.nan_at is not None and self.nan_at < len(data):
            data[self.nan_at]["embedding"][0] = float("nan")
        with self._count_lock:
            self.answered += len(texts)
        data.reverse()  # servers may answer out of order: `index` says which is which
        return (
            200,
            {"object": "list", "data": data, "model": payload.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}},
            {},
        )


class FakeRerank(_Server):
    def __init__(self, style: str = "cohere", max_requests: int = 200):
        self.style = style
        super().__init__(max_requests)

    def answer(self, path: str, payload: Any) -> tuple[int, Any, dict]:
        if not path.endswith("/rerank") or not isinstance(payload, dict):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        docs = payload.get("documents") if self.style == "cohere" else payload.get("texts")
        if not isinstance(docs, list):
            return 422, {"error": {"message": "missing documents/texts"}}, {}
        words = set(WORD.findall(str(payload.get("query", "")).lower()))
        scores = [len(words & set(WORD.findall(d.lower()))) / (1 + len(words)) for d in docs]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])
        if self.style == "tei":
            return 200, [{"index": i, "score": scores[i]} for i in order], {}
        return 200, {"results": [{"index": i, "relevance_score": scores[i]} for i in order]}, {}
