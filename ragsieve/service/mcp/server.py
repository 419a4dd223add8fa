"""The MCP server (official `mcp` SDK): ragsieve's indexes as tools for coding agents.

Tools: `search`, `ask`, `read`, `indexes` (`ragsieve.service.mcp.tools`).
Over stdio (`ragsieve mcp --index NAME=DIR`: the agent starts the process, so
every index it was given is reachable) and over Streamable HTTP at `/mcp` of
`ragsieve serve` (stateless; a call's reply is a short event stream, so `ask` can send progress
notifications before its result), behind the same API keys and
index scopes as the other routes: no key or a wrong one is a 401 before MCP
sees the request. A failing call is an MCP tool error with one line of text
(`isError: true`); the session always stays up.
"""

import logging
import time
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

try:
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.types import ToolAnnotations
except ImportError as exc:  # the mcp extra is not installed: its one-line error, not a traceback
    from ragsieve.tools.extras import Extra, missing

    raise missing(Extra.MCP, "the MCP server (ragsieve mcp, /mcp)", exc.name or "mcp") from None

from ragsieve.agent.errors import RagsieveError
from ragsieve.insights.record import Surface
from ragsieve.service.auth.keys import ALL
from ragsieve.service.indexes.contract import Registry
from ragsieve.service.mcp import schema as mcp_schema
from ragsieve.service.mcp import tools as mcp_tools
from ragsieve.tools.index.search.where import Where

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0  # `ask` sends a progress notification at least this often while it works
SCOPE_KEY = "ragsieve_scope"  # where the HTTP wrapper leaves the key's scope in the ASGI scope's state
READERS_KEY = "ragsieve_readers"  # ... and the caller's principals (None: unrestricted; `identity`)

INSTRUCTIONS = (
    "ragsieve answers questions over indexed code repositories, documents and websites. Use `search` "
    "to find passages (cheap, no LLM), `read` to open a hit or citation with line numbers, and `ask` for "
    "an answer with citations (slower: runs an LLM). `indexes` lists what is served."
)
IndexArg = Annotated[
    str | None, Field(None, description="the index to use (see the `indexes` tool); may be omitted when the server has only one")
]
WhereArg = Annotated[
    Where | None,
    Field(
        None,
        description="metadata filter, every field given must match: source "
        "(exact path or URL), path_prefix (e.g. `src/http/`), "
        "language (e.g. `python`), kind (`code`, `markdown`, "
        "`html`, `text`, `pdf`...), tenant, symbol_kind "
        "(`function`, `class`...: definitions only), attributes "
        "(an uploaded file's attributes, all equal)",
    ),
]


def build_mcp(
    registry: Registry, *, limiter: anyio.CapacityLimiter | None = None, timeout_s: float = 120.0, host: str = "127.0.0.1"
) -> FastMCP:
    """A FastMCP server over `registry`; `limiter` bounds the `ask` calls running at once."""
    server = _server(host)
    calls = _Calls(registry, limiter or anyio.CapacityLimiter(4), timeout_s)
    _add_search(server, calls)
    _add_ask(server, calls)
    _add_read(server, calls)
    _add_indexes(server, calls)
    mcp_schema.make_strict(server)
    return server


def _server(host: str) -> FastMCP:
    """The FastMCP server, DNS-rebinding protection on when only local agents may call, logging left alone."""
    loopback = host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=loopback,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"] if loopback else [],
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = FastMCP(
        "ragsieve",
        instructions=INSTRUCTIONS,
        stateless_http=True,
        json_response=False,
        streamable_http_path="/mcp",
        transport_security=security,
        log_level="WARNING",
    )
    root.handlers[:] = handlers  # FastMCP calls logging.basicConfig; a library must not configure logging
    root.setLevel(level)
    return server


def scope_of(ctx: Context) -> set[str]:
    """The caller's index scope: every index over stdio, the key's over HTTP (none: refused)."""
    request = getattr(ctx.request_context, "request", None)
    if request is None:  # stdio: the agent started this process with these indexes
        return {ALL}
    scope = request.scope.get("state", {}).get(SCOPE_KEY)
    if scope is None:
        raise ToolError("this MCP endpoint needs an API key (Authorization: Bearer <key>)")
    return scope


def readers_of(ctx: Context) -> tuple[str, ...] | None:
    request = getattr(ctx.request_context, "request", None)
    return None if request is None else request.scope.get("state", {}).get(READERS_KEY)


def read_as(ctx: Context, where: Where | None) -> Where | None:
    readers = readers_of(ctx)
    return where if readers is None else (where or Where()).reading_as(readers)


class _Calls:
    """What every tool shares: the registry, the limiter its calls run under, the request timeout."""

    def __init__(self, registry: Registry, limiter: anyio.CapacityLimiter, timeout_s: float) -> None:
        self.registry, self.limiter, self.timeout_s = registry, limiter, timeout_s
        defaults = sorted({live.config.plan for live in registry.orchestrators.values()})
        self.default_plan = defaults[0] if len(defaults) == 1 else "each index's own (the `indexes` tool lists it)"

    async def run(self, fn, *args) -> Any:
        """`fn(*args)` in a worker thread; any failure an MCP tool error of one line."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        except mcp_tools.ToolFault as exc:
            raise ToolError(str(exc)) from None
        except RagsieveError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # reported as a tool error; the session stays up
            log.exception("MCP tool failed")
            raise ToolError(f"internal error ({type(exc).__name__}: {str(exc)[:200]})") from None


LOOKS = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def _add_search(server: FastMCP, calls: _Calls) -> None:
    @server.tool(
        description="Search an index (BM25 + dense hybrid, no LLM): ranked passages, each with a citation "
        "label (`path:start-end (Symbol)` for code, `URL#anchor` for web pages), its deepest "
        "`location`, chunk_id, score (the hybrid score, 0..1, in result order) and a snippet. "
        "Pass a label, chunk_id or path to `read` for the full text.",
        annotations=LOOKS,
    )
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=4000, description="what to look for")],
        ctx: Context,
        index: IndexArg = None,
        top_k: Annotated[int, Field(ge=1, le=50, description="hits to return")] = 8,
        where: WhereArg = None,
        ranking: Annotated[
            Literal["hybrid", "source-first"] | None,
            Field(
                None,
                description="source-first: definitions in source files before other code, tests "
                "and prose (for 'where is X implemented'); default: hybrid",
            ),
        ] = None,
    ) -> mcp_schema.SearchResult:
        return await calls.run(mcp_tools.search, calls.registry, scope_of(ctx), query, index, top_k, read_as(ctx, where), ranking)


def _add_ask(server: FastMCP, calls: _Calls) -> None:
    plans, default_plan = ", ".join(calls.registry.plans), calls.default_plan

    @server.tool(
        description=f"Answer a question from an index with cited passages, by an LLM (seconds to "
        f"minutes: it sends progress notifications every {PROGRESS_EVERY_S:.0f} s while it "
        f"works; the server stops it at its request timeout, {calls.timeout_s:.0f} s). Runs "
        f"the plan `plan`, by default {default_plan} (plans: {plans}). Returns the "
        f"answer, its citations (labels and locations to `read`), `grounding` (`none`: the "
        f"answer cites no passage, so it is not grounded in the documents), `resolved` and "
        f"`abstention` (why it declined).",
        annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=False, openWorldHint=False),
    )
    async def ask(
        question: Annotated[str, Field(min_length=1, max_length=8000)],
        ctx: Context,
        index: IndexArg = None,
        plan: Annotated[str | None, Field(None, description=f"plan name: {plans}; default: {default_plan}")] = None,
        where: WhereArg = None,
        strict: Annotated[
            bool | None,
            Field(
                None,
                description="replace an answer that cites none of the "
                "passages with the abstention and the "
                "closest passages; default: the server's",
            ),
        ] = None,
    ) -> mcp_schema.AskResult:
        return await _answer(calls, ctx, question, index, plan, read_as(ctx, where), strict)


async def _answer(
    calls: _Calls, ctx: Context, question: str, index: str | None, plan: str | None, where: Where | None, strict: bool | None
) -> Any:
    """Run the plan in a worker thread, sending a progress notification per step and at least every
    `PROGRESS_EVERY_S` (clients that reset their timeout on progress wait for the answer)."""
    from ragsieve.service.common.jobs import question_budget

    registry, scope = calls.registry, scope_of(ctx)
    done = {"steps": 0}
    started = time.monotonic()

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "step":
            done["steps"] += 1
            anyio.from_thread.run(ctx.report_progress, done["steps"], None, f"step {data.get('step')} done")

    def answer() -> dict:
        name, live = mcp_tools.pick_index(registry, scope, index)
        if plan is not None and plan not in registry.plans:
            raise mcp_tools.ToolFault(f"unknown plan {plan!r}; choose one of {', '.join(registry.plans)}")
        budget = question_budget(live, calls.timeout_s)
        overrides = {"abstention": {"strict": strict}} if strict is not None else None
        asked = time.monotonic()
        answered = live.ask(question, plan=plan, budget=budget, where=where, overrides=overrides, on_event=on_event)
        logged = registry.logged(name, Surface.MCP)
        if logged is not None:
            logged.hook.asked(name, Surface.MCP, answered, time.monotonic() - asked)
        return mcp_tools.answer_record(name, answered)

    async def keep_alive() -> None:
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            await ctx.report_progress(done["steps"], None, f"working ({time.monotonic() - started:.0f} s)")

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(keep_alive)
        try:
            result = await calls.run(answer)
        except Exception as exc:  # raised outside the task group, as itself (not an exception group)
            failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


def _add_read(server: FastMCP, calls: _Calls) -> None:
    @server.tool(
        description="Read the source text behind a citation label, chunk_id or path (as `search`/`ask` "
        "return them; a path suffix such as `httpx/_auth.py` finds the file), with line "
        "numbers; `neighbours` adds that many chunks before and after.",
        annotations=LOOKS,
    )
    async def read(
        ref: Annotated[
            str,
            Field(
                min_length=1,
                max_length=4096,
                description="a citation label (`src/app.py:10-42 (App.run)`, "
                "`https://site/page#section`), a chunk_id (`doc#3`) or a "
                "path or its last parts (`http/_auth.py:20-40`)",
            ),
        ],
        ctx: Context,
        index: IndexArg = None,
        neighbours: Annotated[int, Field(ge=0, le=5, description="surrounding chunks to add")] = 0,
    ) -> mcp_schema.ReadResult:
        return await calls.run(mcp_tools.read, calls.registry, scope_of(ctx), ref, index, neighbours, readers_of(ctx))


def _add_indexes(server: FastMCP, calls: _Calls) -> None:
    @server.tool(
        description="List the indexes this server answers from: name, backend, chunk and document "
        "counts, live generation and when it was built, embedding model, plans and the "
        "default plan. Vector stores made over the documents API are listed only with "
        "`include_stores` (their `name` is the id; their store name also works as `index`).",
        annotations=LOOKS,
    )
    async def indexes(
        ctx: Context, include_stores: Annotated[bool, Field(description="list vector stores too")] = False
    ) -> mcp_schema.IndexesResult:
        return await calls.run(mcp_tools.indexes, calls.registry, scope_of(ctx), include_stores, readers_of(ctx))


class KeyedMCP:
    """ASGI wrapper of the Streamable HTTP endpoint: the key checked like every route's (401 otherwise), its
    scope handed to the tools through the request's state."""

    def __init__(self, app, keys) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.datastructures import Headers

        from ragsieve.service.auth.scope import identify
        from ragsieve.service.common.errors import ApiError, error_response

        client = scope.get("client")
        try:  # the same key, token and proxy-header checks as every route (`auth.identify`)
            who = identify(self.keys, Headers(scope=scope), client[0] if client else None)
        except ApiError as exc:
            response = error_response(exc.status, exc.message, code=exc.code, headers=exc.headers)
            return await response(scope, receive, send)
        scope.setdefault("state", {})[SCOPE_KEY] = who.scope
        scope["state"][READERS_KEY] = who.readers
        await self.app(scope, receive, send)


def mount(app, registry: Registry, keys, settings):
    """Add `/mcp` to the FastAPI app; returns the session manager, whose `run()` must wrap the app's lifespan."""
    from mcp.server.fastmcp.server import StreamableHTTPASGIApp
    from starlette.routing import Route

    server = build_mcp(
        registry, limiter=anyio.CapacityLimiter(settings.max_concurrent), timeout_s=settings.request_timeout_s, host=settings.host
    )
    server.streamable_http_app()  # creates the session manager
    manager = server.session_manager
    app.router.routes.append(
        Route("/mcp", endpoint=KeyedMCP(StreamableHTTPASGIApp(manager), keys), methods=["GET", "POST", "DELETE"])
    )
    return manager
