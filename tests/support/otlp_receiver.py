"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests (a helper module, not a test file): it
decodes each `ExportTraceServiceRequest` with opentelemetry-proto and keeps the spans, or refuses (503) or
stalls, as a down or slow collector would. It stops by itself after `lifetime_s`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[str] = field(default_factory=list)
    status: int = 0


def _value(v) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class Receiver:
    def __init__(self, mode: str = "ok", stall_s: float = 0.0, lifetime_s: float = 120.0) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.mode, self.stall_s = mode, stall_s
        self.spans: list[Received] = []
        self.requests = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with owner.lock:
                    owner.requests += 1
                if owner.mode == "refuse":
                    self.send_response(503)  # a retryable refusal: the exporter retries within its timeout
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if owner.mode == "stall":
                    time.sleep(owner.stall_s)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                got = [
                    Received(
                        s.name,
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                        s.kind,
                        {a.key: _value(a.value) for a in s.attributes},
                        [e.name for e in s.events],
                        s.status.code,
                    )
                    for rs in request.resource_spans
                    for ss in rs.scope_spans
                    for s in ss.spans
                ]
                with owner.lock:
                    owner.spans.extend(got)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="otlp-receiver")
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Receiver":
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, predicate, timeout_s: float = 20.0) -> list[Received]:
        """The spans once `predicate(spans)` holds (flushing ragsieve's exporter first)."""
        from ragsieve.tools import tracing

        ends = time.monotonic() + timeout_s
        while True:
            tracing.flush(5.0)
            with self.lock:
                spans = list(self.spans)
            if predicate(spans) or time.monotonic() > ends:
                return spans
            time.sleep(0.1)
