"""Pages and assets: the chat page (`/`, `/ui`), its script, `/widget.js`, the source view, the licences."""

from __future__ import annotations

import time

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from ragsieve.service.auth.scope import caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.web import assets, source_view
from ragsieve.service.web.links import signed_part, verify

router = APIRouter()

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'; object-src 'none'"
)
SOURCE_CSP = "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
SAFE = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


@router.get("/", include_in_schema=False)
@router.get("/ui", include_in_schema=False)
async def chat_page(request: Request):
    html = assets.read("chat.html")
    try:  # the same check the page's first API call meets: a page that needs a key asks for it before calling
        caller(request)
    except ApiError as exc:
        if exc.status == 401:
            html = html.replace("<body>", '<body data-needs-key="true">', 1)
    return HTMLResponse(html, headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-cache", **SAFE})


@router.get("/ui/static/{name}", include_in_schema=False)
async def static(name: str):
    if name not in assets.FILES:
        raise ApiError(404, f"no asset {name!r}")
    return Response(assets.read(name), media_type=assets.FILES[name], headers={"Cache-Control": "max-age=300", **SAFE})


@router.get("/ui/assistant.js", include_in_schema=False)
async def page_script():
    return Response(
        assets.bundle("page.js"), media_type="text/javascript; charset=utf-8", headers={"Cache-Control": "max-age=300", **SAFE}
    )


@router.get("/widget.js", include_in_schema=False)
async def widget_script():
    return Response(
        assets.bundle("widget.js"),
        media_type="text/javascript; charset=utf-8",
        headers={"Cache-Control": "max-age=300", "Cross-Origin-Resource-Policy": "cross-origin", **SAFE},
    )


@router.get("/ui/licenses", include_in_schema=False)
async def licenses():
    return PlainTextResponse(assets.licenses(), headers=SAFE)


@router.get("/ui/source", include_in_schema=False)
async def source(
    request: Request,
    index: str = Query(max_length=64),
    chunk: str = Query(max_length=4000),
    t: str = Query(max_length=64),
    reading_as: str | None = Query(None, alias="as", max_length=8000),
    e: int = Query(0, ge=0, le=2**40),
):
    """A cited document as the index holds it; only for links this server signed (see `links`), and for a
    link made for a caller with an identity, only while those principals may still read the document."""
    app = request.app.state
    signed = signed_part(chunk, reading_as, e)
    if index not in app.registry.orchestrators or not verify(app.web.secret, index, signed, t):
        raise ApiError(404, "no such source (the link is not one this server made)", code="source_not_found")
    if e < time.time():
        raise ApiError(404, "this source link has expired: ask the question again for a fresh one", code="source_link_expired")
    doc_id, _, position = chunk.rpartition("#")
    live_index = app.registry.orchestrators[index].index
    chunks = await anyio.to_thread.run_sync(live_index.store.chunks_of, doc_id)
    if chunks and reading_as is not None and not readable_by(live_index.root, chunks[0].source, reading_as):
        raise ApiError(404, "no such source (the link is not one this server made)", code="source_not_found")
    cited = int(position) if position.isdigit() else -1
    html = source_view.render(index, chunks, cited)
    return HTMLResponse(html, status_code=200 if chunks else 404, headers={"Content-Security-Policy": SOURCE_CSP, **SAFE})


def readable_by(root, source: str, reading_as: str) -> bool:
    from ragsieve.tools.access.labels import load
    from ragsieve.tools.access.principals import may_read, principals

    return may_read(load(root).decide(source).readers, principals(reading_as) if reading_as else ())
