"""A small JSON-over-HTTP API for chatbot backends (`ragsieve serve`).

POST /ask      {"question": "...", "plan": "agentic"?}  -> the `--json` answer shape
GET  /health   -> {"status": "ok", "chunks": N, "plans": [...]}

Questions are answered one at a time (the orchestrator and a local model are
shared); the standard library server is enough for a backend behind a proxy.
"""
from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragsieve.agent.errors import LLMError, RagsieveError, UsageError
from ragsieve.agent.plan.plans import plan_names

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1_000_000


class AskServer:
    """Serves an `Orchestrator` on host:port (port 0 picks a free one)."""

    def __init__(self, orchestrator, host: str = "127.0.0.1", port: int = 8765):
        self.orchestrator = orchestrator
        self._ask_lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def start(self) -> "AskServer":
        self._thread = threading.Thread(target=self.serve_forever, name="ragsieve-serve", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def handle_ask(self, payload: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(payload, dict):
            return 400, {"error": "body must be a JSON object with a 'question'"}
        question, plan = payload.get("question"), payload.get("plan")
        if not isinstance(question, str) or (plan is not None and not isinstance(plan, str)):
            return 400, {"error": "'question' must be a string and 'plan' a string when given"}
        try:
            with self._ask_lock:
                answer = self.orchestrator.ask(question, plan=plan)
        except UsageError as exc:
            return 400, {"error": str(exc)}
        except LLMError as exc:
            return 502, {"error": str(exc)}
        except RagsieveError as exc:
            return 500, {"error": str(exc)}
        return 200, answer.public()

    def handle_health(self) -> dict[str, Any]:
        return {"status": "ok", "chunks": self.orchestrator.index.store.count(),
                "plans": plan_names(self.orchestrator.config)}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                log.info("%s - %s", self.address_string(), format % args)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/health":
                    self._send(200, server.handle_health())
                else:
                    self._send(404, {"error": f"no route GET {self.path}"})

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/ask":
                    self._send(404, {"error": f"no route POST {self.path}"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self._send(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"})
                    return
                try:
                    payload = json.loads(self.rfile.read(length) or b"null")
                except (json.JSONDecodeError, UnicodeDecodeError):
                    self._send(400, {"error": "body is not valid JSON"})
                    return
                self._send(*server.handle_ask(payload))

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
