"""Tracing at the front ends: `start` (every CLI command, `ragsieve serve`, its `--workers` processes and
`ragsieve mcp` apply `[tracing]` and the OTel environment with it, passing the question log's redaction for
captured text), and `TraceRequests`, one span per HTTP request continuing the caller's W3C `traceparent`
(every route), with the trace id returned in the `traceresponse` (W3C Trace Context Level 2) and `x-trace-id`
headers. A question asked in the request is a child of this span (`ragsieve.agent.plan.traced`), so a caller's
trace holds the whole answer. Pure ASGI (streams pass through untouched); while tracing is off it only calls
the app. The spans themselves: `ragsieve.tools.tracing`; docs/tracing.md."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from ragsieve.tools import tracing

_PROPAGATED = (b"traceparent", b"tracestate")


def start(config: Any) -> bool:
    """Apply `config.tracing` (a `Config`, or None for the environment alone); True when tracing is on.
    A bad setting or a missing `[otel]` extra is the one-line error of `ragsieve.tools.tracing.configure`.
    A config whose `[tracing]` sets nothing keeps tracing as the application already configured it."""
    section = getattr(config, "tracing", None)
    if tracing.configured() and (section is None or not section.model_fields_set):
        return tracing.enabled()
    if section is None or not section.capture_content:
        return tracing.configure(section)
    from ragsieve.insights.redact import redact

    return tracing.configure(section, redact=redact)


class TraceRequests:
    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not tracing.enabled():
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ()) if k in _PROPAGATED}
        method = scope.get("method", "GET")
        attributes = {
            "http.request.method": method,
            "url.path": scope.get("path", ""),
            "url.scheme": scope.get("scheme", "http"),
            "ragsieve.caller_trace": "traceparent" in headers,
        }
        with tracing.request_span(f"{method} {scope.get('path', '')}", headers, attributes) as span:
            ids = span.ids()

            async def send_traced(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    span.set("http.response.status_code", message.get("status"))
                    if ids is not None:
                        message = dict(message)
                        message["headers"] = [
                            *message.get("headers", ()),
                            (b"traceresponse", f"00-{ids[0]}-{ids[1]}-{'01' if span.recording else '00'}".encode()),
                            (b"x-trace-id", ids[0].encode()),
                        ]
                await send(message)

            await self.app(scope, receive, send_traced)
            route = getattr(scope.get("route"), "path", None)
            if route:
                span.set("http.route", route)
