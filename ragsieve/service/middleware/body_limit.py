"""ASGI middleware: a request body must be at most `max_bytes` and arrive within `timeout_s`.

Read before the app runs, so a lying `Content-Length` (more announced than
sent) or a body trickled byte by byte costs one timer, not a worker, and gets
408; an oversized one gets 413 without being read to the end. Malformed or
negative `Content-Length` headers are refused by uvicorn's HTTP parser (400).
"""

from __future__ import annotations

import asyncio
import json

from ragsieve.service.common.errors import error_body


class BodyLimit:
    """`paths` gives some routes their own (max_bytes, timeout_s): file uploads are larger than questions."""

    def __init__(self, app, max_bytes: int, timeout_s: float, paths: dict[str, tuple[int, float]] | None = None):
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s
        self.paths = dict(paths or {})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        max_bytes, timeout_s = self.paths.get(scope.get("path", ""), (self.max_bytes, self.timeout_s))
        declared = _content_length(scope)
        if declared is not None and declared > max_bytes:
            return await _reply(send, 413, f"request body of {declared} bytes is over the limit of {max_bytes}")
        chunks, size = [], 0
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout_s
        while True:
            remaining = ends - loop.time()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.001, remaining))
            except asyncio.TimeoutError:
                return await _reply(send, 408, f"request body not complete within {timeout_s:g}s", close=True)
            if message["type"] == "http.disconnect":
                return None
            body = message.get("body", b"")
            size += len(body)
            if size > max_bytes:
                return await _reply(send, 413, f"request body is over the limit of {max_bytes} bytes", close=True)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # after the body: disconnect notices

        return await self.app(scope, replay, send)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _reply(send, status: int, message: str, close: bool = False) -> None:
    data = json.dumps(error_body(status, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
