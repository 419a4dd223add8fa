"""One access-log line per request, and the header that names a ragsieve server.

Every response carries `x-ragsieve-server: <version>` (so a client can tell it
is talking to ragsieve, not to an LLM: `OpenAIChat` refuses such an endpoint
as its model) and `x-request-id` (the caller's, when it sent a sane one).
When the response's last byte is sent, or the client leaves, one line goes to
the `ragsieve.access` logger:

    id=5f2c... POST /v1/chat/completions model=demo status=200 total_ms=812 task=- stages=retrieve:12,answer:790

Routes add what they know to `request.state` (`access_model`, `access_task`,
`access_stages`: {step: seconds}). The library only logs; `ragsieve serve`
(and each of its `--workers` processes) sends the lines to stderr with `to_stderr`.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid

log = logging.getLogger("ragsieve.access")
SERVER_HEADER = b"x-ragsieve-server"
_SANE_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")


def to_stderr() -> None:
    """Send the access lines to stderr whatever -v says: called by the application entry points (`ragsieve serve`
    and each `--workers` process), never by the library itself."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s access %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _version() -> bytes:
    try:
        from importlib.metadata import version

        return version("ragsieve").encode()
    except Exception:  # a source checkout without metadata
        return b"dev"


class AccessLog:
    def __init__(self, app):
        self.app = app
        self.version = _version()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"")
        rid = given if _SANE_ID.match(given or b"-") and given else uuid.uuid4().hex.encode()
        scope.setdefault("state", {})
        seen = {"status": 0, "logged": False}

        def finish() -> None:
            if seen["logged"]:
                return
            seen["logged"] = True
            state = scope.get("state") or {}
            stages = state.get("access_stages") or {}
            route = scope.get("route")
            log.info(
                "id=%s %s %s model=%s status=%s total_ms=%d task=%s stages=%s",
                rid.decode(),
                scope.get("method"),
                getattr(route, "path", scope.get("path")),
                state.get("access_model") or "-",
                seen["status"],
                (time.monotonic() - started) * 1000,
                state.get("access_task") or "-",
                ",".join(f"{k}:{int(v * 1000)}" for k, v in stages.items()) or "-",
            )

        async def sending(message):
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                message = dict(message)
                message["headers"] = list(message.get("headers") or []) + [(SERVER_HEADER, self.version), (b"x-request-id", rid)]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finish()

        try:
            await self.app(scope, receive, sending)
        finally:
            finish()  # the client left mid-stream, or the app failed: the line is still written
