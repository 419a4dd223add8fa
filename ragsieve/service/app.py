"""The FastAPI app of `ragsieve serve`: OpenAI-compatible and native routes over several indexes.

Routes: `GET /v1/models`, `POST /v1/chat/completions` (OpenAI; `stream` true
gives server-sent events), `POST /v1/ask`, `POST /v1/ask/stream` (native),
`GET /healthz`, `GET /readyz`, `GET /metrics` (Prometheus), MCP at `/mcp` (`mcp_server`), and the assistant's chat
page at `/` with `/widget.js` (`ragsieve.service.web`). Every error is in
OpenAI's shape. Questions run in threads, at most `max_concurrent` at once and
`queue_limit` waiting; beyond that 429 with Retry-After.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import asynccontextmanager, nullcontext

try:
    from fastapi import FastAPI
    from fastapi.middleware.cors import CORSMiddleware
except ImportError:  # the server extra is not installed: its one-line error, not a traceback
    from ragsieve.tools.extras import SERVER_MODULES, Extra, require_all

    require_all(Extra.SERVER, SERVER_MODULES, "the HTTP service (ragsieve serve)")
    raise

from ragsieve.service import native_routes, web
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.chat import routes as chat_routes
from ragsieve.service.common import errors
from ragsieve.service.common.insights_hook import open_insights
from ragsieve.service.documents import routes as documents_routes
from ragsieve.service.documents.service import Documents
from ragsieve.service.indexes.contract import Registry
from ragsieve.service.middleware.access_log import AccessLog
from ragsieve.service.middleware.body_limit import BodyLimit
from ragsieve.service.middleware.content_type import FormAsJson
from ragsieve.service.middleware.limits import Admission
from ragsieve.service.middleware.metrics import ServiceMetrics
from ragsieve.service.middleware.tracing import TraceRequests
from ragsieve.service.middleware.tracing import start as start_tracing
from ragsieve.service.settings import ServiceSettings
from ragsieve.tools.errors import MissingExtraError

log = logging.getLogger(__name__)


def create_app(
    registry: Registry,
    settings: ServiceSettings | None = None,
    keys: KeyRing | None = None,
    *,
    preload_model: bool = True,
    close_registry: bool = False,
    widget_keys=None,
) -> FastAPI:
    """The app over an `IndexRegistry`. `preload_model` starts the LLM in the background at start-up
    (`/readyz` says when it is up); `close_registry` closes the indexes and the model at shutdown."""
    settings = settings or ServiceSettings()
    keys = keys or KeyRing()
    start_tracing(getattr(registry, "config", None))  # [tracing] (also in --workers processes); docs/tracing.md
    documents = Documents(registry, settings, registry.config) if settings.data_dir else None
    keys.check_names(set(registry.orchestrators) | (documents.store_ids() if documents else set()))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if preload_model:
            registry.warming = True  # /readyz waits until each index has run one search (`warm_indexes`)
            threading.Thread(target=_preload, args=(registry,), name="ragsieve-model-start", daemon=True).start()
        registry.watch()  # new generations are followed without a restart (`live`)
        try:
            async with app.state.mcp.run() if app.state.mcp is not None else nullcontext():
                yield
        finally:
            if documents is not None:
                documents.close()
            if close_registry:
                registry.close()

    app = FastAPI(title="ragsieve", lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = ServiceMetrics()
    app.state.registry, app.state.settings, app.state.keys = registry, settings, keys
    app.state.metrics = metrics
    app.state.admission = Admission(settings.max_concurrent, settings.queue_limit, settings.retry_after_s, metrics)
    app.state.started = int(time.time())
    errors.install(app)
    app.include_router(chat_routes.router)
    app.include_router(native_routes.router)
    app.state.mcp = _mount_mcp(app, registry, keys, settings)  # MCP over Streamable HTTP at /mcp
    app.state.documents = documents
    if registry.insights is None:
        registry.insights = open_insights(registry, settings.data_dir)  # None unless [insights] enabled
    app.include_router(documents_routes.router)  # files, vector stores, crawl jobs

    @app.middleware("http")
    async def count(request, call_next):
        response = await call_next(request)
        route = request.scope.get("route")
        metrics.requests.labels(getattr(route, "path", "unmatched"), str(response.status_code)).inc()
        return response

    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
            max_age=600,
        )
    upload = (settings.max_file_bytes + 64 * 1024, max(settings.body_timeout_s, 300.0))  # a file and its form
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s, paths={"/v1/files": upload}
    )
    app.add_middleware(FormAsJson)  # `curl -d '{json}'` labels JSON as a form
    web.install(app, settings, widget_keys)  # the chat page, widget and feedback (its CORS outermost)
    app.add_middleware(AccessLog)  # one line per request, the x-ragsieve-server header on every reply
    app.add_middleware(TraceRequests)  # outermost: the request's span, continuing the caller's traceparent
    return app


def _mount_mcp(app: FastAPI, registry: Registry, keys: KeyRing, settings: ServiceSettings):
    """MCP at /mcp (its session manager), or, without the mcp extra, a /mcp that answers 501 with the one line
    naming the install (also logged at start-up)."""
    try:
        from ragsieve.service.mcp import server as mcp_server
    except MissingExtraError as exc:
        log.warning("no MCP at /mcp: %s", exc)
        message = str(exc)

        @app.api_route("/mcp", methods=["GET", "POST", "DELETE"], include_in_schema=False)
        async def mcp_missing():
            return errors.error_response(501, message, code="not_installed")

        return None
    return mcp_server.mount(app, registry, keys, settings)


def _preload(registry: Registry) -> None:
    registry.warm_indexes()
    try:
        registry.shared_llm()
    except Exception as exc:  # reported by /readyz and at the first question
        log.error("the model did not start: %s", exc)
