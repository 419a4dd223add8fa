"""A local OpenAI-compatible stub HTTP server for tests (a helper module, not a test file).

`StubOpenAI` listens on 127.0.0.1 (a free port), answers GET /v1/models with
its model list and POST /v1/chat/completions with the next scripted
`StubReply` (status, headers, JSON or raw body, optional delay), and records
every request it received. Use it as a context manager; it refuses to serve
more than `max_requests` requests and its delays end when it closes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StubReply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    trickle_s: float = 0.0  # > 0: send the body one byte at a time, this many seconds apart
    content_type: str | None = None  # None: application/json for dict/list bodies, else text/plain


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any
    at: float


def chat_body(
    content: str | None,
    *,
    prompt_tokens: int = 7,
    completion_tokens: int = 3,
    refusal: str | None = None,
    model: str = "stub-model",
    usage: bool = True,
) -> dict[str, Any]:
    """A chat.completion response body with one choice."""
    body: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content, "refusal": refusal}}
        ],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return body


def error_body(message: str, *, type_: str = "invalid_request_error", param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": None}}


def ok(content: str, **kwargs: Any) -> StubReply:
    return StubReply(200, chat_body(content, **kwargs))


class StubOpenAI:
    """Scripted OpenAI-compatible server. `base_url` ends in /v1 like the real thing."""

    def __init__(self, replies: list[StubReply] | None = None, *, models: list[str] | None = None, max_requests: int = 100):
        self.queue: deque[StubReply] = deque(replies or [])
        self.models = ["stub-model"] if models is None else list(models)
        self.max_requests = max_requests
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-openai", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: StubReply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "StubOpenAI":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, record: RecordedRequest) -> StubReply:
        with self._lock:
            self.requests.append(record)
            if len(self.requests) > self.max_requests:
                return StubReply(503, error_body(f"stub: more than {self.max_requests} requests"))
            if self.queue:
                return self.queue.popleft()
        return StubReply(500, error_body("stub: no scripted reply left", type_="server_error"))

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                return

            def _record(self, payload: Any) -> RecordedRequest:
                return RecordedRequest(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, payload, time.monotonic()
                )

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/health":  # llama.cpp's server: up and its model loaded
                    self._send(StubReply(200, {"status": "ok"}))
                elif self.path.rstrip("/").endswith("/models"):
                    with stub._lock:
                        stub.requests.append(self._record(None))
                    data = [{"id": m, "object": "model", "owned_by": "stub"} for m in stub.models]
                    self._send(StubReply(200, {"object": "list", "data": data}))
                else:
                    self._send(StubReply(404, error_body(f"stub: no route GET {self.path}")))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    payload = json.loads(raw or b"null")
                except json.JSONDecodeError:
                    payload = raw.decode("utf-8", "replace")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(StubReply(404, error_body(f"stub: no route POST {self.path}")))
                    return
                reply = stub._next(self._record(payload))
                if reply.delay_s > 0 and stub._closing.wait(reply.delay_s):
                    return
                self._send(reply)

            def _send(self, reply: StubReply) -> None:
                if isinstance(reply.body, (dict, list)):
                    data, ctype = json.dumps(reply.body).encode("utf-8"), "application/json"
                else:
                    data, ctype = str(reply.body or "").encode("utf-8"), "text/plain"
                ctype = reply.content_type or ctype
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if reply.trickle_s <= 0:
                        self.wfile.write(data)
                    for i in range(len(data) if reply.trickle_s > 0 else 0):
                        if stub._closing.wait(reply.trickle_s):
                            return
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
