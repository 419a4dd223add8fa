"""`curl -d '{...}'` sends JSON labelled `application/x-www-form-urlencoded`: read it as JSON.

The docs' examples (and most people's first try) post JSON with `curl -d`
and no `Content-Type` header; curl then labels the body as a form. Every
ragsieve POST route takes JSON only, so such a body is relabelled
`application/json` before routing (a body that is not JSON still gets a 400
saying so). Other content types are left as they are.
"""

from __future__ import annotations

FORM = b"application/x-www-form-urlencoded"


class FormAsJson:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") == "POST":
            headers = scope.get("headers") or []
            if any(k == b"content-type" and v.split(b";")[0].strip().lower() == FORM for k, v in headers):
                scope = dict(scope)
                scope["headers"] = [(k, b"application/json") if k == b"content-type" else (k, v) for k, v in headers]
        await self.app(scope, receive, send)
