"""A slow OpenAI-compatible streaming endpoint for tests (a helper module, not a test file).

`SlowStream` listens on 127.0.0.1 and answers every POST /v1/chat/completions
with server-sent events paced as scripted: `silence_s` before anything, then
`tokens` content chunks `interval_s` apart (or, with `pings`, only `: ping`
comments every `interval_s`), then `[DONE]`. `role_first` sends a role-only delta
at once (as llama.cpp does); `progress` sends that many `prompt_progress` events
`interval_s` apart before the first token (llama.cpp's `return_progress`).
Request bodies are kept in `bodies`. It records when each response
ended and whether the client went away first. Everything it does is bounded
by `max_s`, and it stops when closed.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Served:
    started: float
    ended: float | None = None
    client_left: bool = False
    chunks: int = 0


@dataclass
class SlowStream:
    tokens: int = 10
    interval_s: float = 0.05
    silence_s: float = 0.0
    pings: bool = False  # send only `: ping` comments, never a token
    max_s: float = 30.0
    role_first: bool = False
    progress: int = 0
    served: list[Served] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)

    def __post_init__(self):
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "SlowStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _handler(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "slow", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                owner.bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"))
                record = Served(started=time.monotonic())
                owner.served.append(record)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                ends = record.started + owner.max_s
                try:
                    self.wfile.flush()
                    if owner.role_first:
                        self._event(
                            {"role": "assistant", "content": None}, {"total": 900, "cache": 0, "processed": 0, "time_ms": 0}
                        )
                    if owner.silence_s and owner._closing.wait(owner.silence_s):
                        return
                    for step in range(owner.progress):
                        self._event(
                            {}, {"total": 900, "cache": 0, "processed": (step + 1) * 900 // owner.progress, "time_ms": step}
                        )
                        if owner._closing.wait(owner.interval_s):
                            return
                    sent = 0
                    while time.monotonic() < ends and (owner.pings or sent < owner.tokens):
                        if owner.pings:
                            self.wfile.write(b": ping\n\n")
                        else:
                            chunk = {
                                "id": "c",
                                "object": "chat.completion.chunk",
                                "created": 0,
                                "model": "slow",
                                "choices": [{"index": 0, "delta": {"content": f"t{sent} "}, "finish_reason": None}],
                            }
                            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                            sent += 1
                        self.wfile.flush()
                        record.chunks += 1
                        if owner._closing.wait(owner.interval_s):
                            return
                    if not owner.pings:
                        end = {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "slow",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        }
                        self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    record.client_left = True
                finally:
                    record.ended = time.monotonic()

            def _event(self, delta: dict, progress: dict) -> None:
                chunk = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "slow",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    "prompt_progress": progress,
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

        return Handler
