"""Who calls the assistant routes (`/ui/api/*`): the chat page or a widget key, and from which origin.

- A widget key (sent as `Authorization: Bearer pk-...`) works only from a
  browser page on one of its origins, only for its indexes, within its rate.
- Anything else is the chat page: same origin as the server (or a configured
  `--cors-origin`), with the API key rules of `/v1` (none on an open server).

`WidgetCors` answers CORS preflights and labels responses for origins some
widget key allows; the key/origin pair itself is checked on every call. Another
origin's preflight is answered too (not 405), and its error replies carry CORS
headers, so a widget on a site its key does not allow can say "origin not
allowed" instead of "cannot be reached"; every call from such an origin is
refused by `ui_caller`, so all it can read is that refusal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fastapi import Request

from ragsieve.service.auth.identity import USER_TOKEN, IdentityRefused
from ragsieve.service.auth.keys import allows
from ragsieve.service.auth.scope import caller, peer
from ragsieve.service.auth.widget_keys import WidgetKey, normal_origin
from ragsieve.service.common.errors import ApiError
from ragsieve.tools.index.search.where import Where

API_PREFIX = "/ui/api/"
WIDGET_KEY_PREFIX = "pk-"  # widget keys are published keys, named so (keys-file examples, docs/access.md)


@dataclass
class UiCaller:
    scope: set[str]
    via: str  # "page" or "widget:<key prefix>" (stored with feedback)
    widget: WidgetKey | None = None
    readers: tuple[str, ...] | None = None  # the principals answers are read as (None: unrestricted)

    def where(self) -> Where | None:
        return None if self.readers is None else Where(readers=self.readers)

    def visible(self, names: list[str]) -> list[str]:
        return [n for n in names if allows(self.scope, n)]

    def index(self, registry, wanted: str | None) -> str:
        """The index a call names (or the registry's default for this caller, `IndexRegistry.default_index`);
        another one is 'not found', like a missing one."""
        visible = self.visible(list(registry.orchestrators))
        if wanted is None:
            default = registry.default_index(visible)
            if default is None:
                raise ApiError(400, "name the index: several are served", param="index")
            return default
        if wanted not in visible:
            raise ApiError(
                404, f"the index {wanted!r} does not exist or you do not have access to it", code="model_not_found", param="index"
            )
        return wanted


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def same_site(request: Request, origin: str | None) -> bool:
    """The Origin names this server's host[:port] (the scheme is not compared: behind a TLS proxy the page is
    https while the server sees http)."""
    host = request.headers.get("host")
    if not host or origin is None:
        return False
    mine = normal_origin(f"{origin.split('://', 1)[0]}://{host}")
    return mine == origin


def ui_caller(request: Request) -> UiCaller:
    web = request.app.state.web
    raw_origin = request.headers.get("origin")
    origin = normal_origin(raw_origin) if raw_origin else None
    bearer = _bearer(request)
    key = web.widget_keys.find(bearer)
    if (
        key is None
        and bearer is not None
        and bearer.startswith(WIDGET_KEY_PREFIX)
        and raw_origin is not None
        and not same_site(request, origin)
        and origin not in web.page_origins
    ):
        raise ApiError(
            401, "this widget key is not known to the server: check data-key in the page's <script> tag", code="invalid_api_key"
        )
    if key is not None:
        if origin is None or origin not in key.origins:
            raise ApiError(
                403,
                f"this widget key is not allowed on {raw_origin or 'a page without an Origin'}: "
                f"add the site to the key's origins",
                code="origin_not_allowed",
            )
        wait = key.take(visitor(request))
        if wait > 0:
            raise ApiError(
                429,
                f"too many questions from this widget (up to {key.visitor_requests_per_minute} per "
                f"minute per visitor, {key.requests_per_minute} in all); retry later",
                code="rate_limited",
                headers={"Retry-After": str(math.ceil(wait))},
            )
        return UiCaller(set(key.indexes), key.label, key, widget_reader(request))
    if raw_origin is not None and not same_site(request, origin) and origin not in web.page_origins:
        raise ApiError(403, f"calls from {raw_origin} need a widget key that allows that origin", code="origin_not_allowed")
    who = caller(request)
    return UiCaller(who.scope, "page", readers=who.readers)


def visitor(request: Request) -> str:
    """Whom a widget's per-visitor rate counts: the socket peer, or, when the peer is one of `[identity]
    trusted_proxies`, the last address that proxy appended to `X-Forwarded-For` (the explicitly configured
    chain; a header from any other peer is ignored)."""
    address = peer(request) or "?"
    if request.app.state.keys.identity.trusted(address):
        hops = [h.strip() for h in request.headers.get("x-forwarded-for", "").split(",") if h.strip()]
        if hops:
            return hops[-1][:64]
    return address


def widget_reader(request: Request) -> tuple[str, ...]:
    """A widget visitor's principals: those of the signed user token the host page passes
    (`X-Ragsieve-User-Token`), else none (public documents only: a widget key is visible to anyone)."""
    token = request.headers.get(USER_TOKEN, "").strip()
    if not token:
        return ()
    settings = request.app.state.keys.identity
    if settings.jwt is None:
        raise ApiError(403, "user tokens are not accepted: the keys file has no [identity.jwt]", code="identity_refused")
    try:
        return settings.jwt.verify(token)
    except IdentityRefused as exc:
        raise ApiError(exc.status, str(exc), code="identity_refused") from None


class WidgetCors:
    """Pure ASGI middleware: CORS for the assistant routes, for origins some widget key allows."""

    def __init__(self, app, widget_keys, page_origins: set[str] | None = None):
        self.app, self.widget_keys = app, widget_keys
        self.page_origins = page_origins or set()  # `--cors-origin`: the CORS middleware inside answers them

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = normal_origin(headers["origin"]) if "origin" in headers else None
        if origin is None or origin in self.page_origins:
            return await self.app(scope, receive, send)
        allowed = self.widget_keys.any_allows(origin)
        cors = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
        if not allowed:
            return await self._refusals_readable(scope, receive, send, headers, cors)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            return await _preflight(send, cors, max_age_s=600)

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"access-control-allow-origin"]
                message = {**message, "headers": kept + cors}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _refusals_readable(self, scope, receive, send, headers: dict[str, str], cors: list) -> None:
        """An origin no widget key allows: its preflight is granted (a short while), and its replies carry CORS
        headers only when they are errors (the refusal `ui_caller` gives every call from it)."""
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            return await _preflight(send, cors, max_age_s=60)

        async def send_errors_with_cors(message):
            if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"access-control-allow-origin"]
                message = {**message, "headers": kept + cors}
            await send(message)

        await self.app(scope, receive, send_errors_with_cors)


async def _preflight(send, cors: list, max_age_s: int) -> None:
    """A granted CORS preflight: the methods and headers the page and widget send, cached `max_age_s`."""
    await send(
        {
            "type": "http.response.start",
            "status": 204,
            "headers": cors
            + [
                (b"access-control-allow-methods", b"GET, POST"),
                (b"access-control-allow-headers", b"Authorization, Content-Type, X-Ragsieve-User-Token"),
                (b"access-control-max-age", str(max_age_s).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
