"""OpenAI's Files and Vector Stores routes (the subset file-search apps use), plus native crawl jobs.

`POST /v1/files` (multipart), `GET /v1/files`, `GET/DELETE /v1/files/{id}`;
`POST/GET /v1/vector_stores`, `GET/DELETE /v1/vector_stores/{id}`;
`POST/GET /v1/vector_stores/{id}/files`, `GET/DELETE /v1/vector_stores/{id}/files/{file_id}`;
`POST /v1/vector_stores/{id}/search`; `POST /v1/indexes/{name}/crawl`, `GET /v1/jobs/{id}`;
file batches (`batch_routes`); updates and contents (`edit_routes`).
Reads need a key whose scope reaches the store (else 404, like a missing one);
writes need `:write` in it (else 403). Deleting a file returns once its
chunks are out of the served generation.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragsieve.service.auth.keys import ALL, allows
from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents import batch_routes, edit_routes, indexed, search_routes, views
from ragsieve.service.documents.access import any_write, docs_of, readable_store, writable, writable_store
from ragsieve.service.documents.attach import attach, check_chunking, detach
from ragsieve.service.documents.expiry import check_expires_after
from ragsieve.service.documents.filters import check_attributes
from ragsieve.service.documents.readable import entry_readable, file_readable, readable_for, visible_entry, visible_file

router = APIRouter()
router.include_router(search_routes.router)  # search, crawl and job routes
router.include_router(batch_routes.router)  # file batches
router.include_router(edit_routes.router)  # updates, file contents


# -- files ---------------------------------------------------------------------
@router.post("/v1/files")
async def upload(
    request: Request, file: UploadFile = File(...), purpose: str = Form("assistants"), who: Caller = Depends(caller)
):
    docs = docs_of(request)
    any_write(who, "uploading files")
    limit = request.app.state.settings.max_file_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, f"the file is over the limit of {limit} bytes", code="file_too_large", param="file")
    if not data:
        raise ApiError(400, "the file is empty", code="empty_file", param="file")
    if len(docs.catalog.files()) >= request.app.state.settings.max_files:
        raise ApiError(
            400,
            f"this server holds {request.app.state.settings.max_files} files, its limit: delete some first",
            code="too_many_files",
        )
    return docs.catalog.add_file(file.filename or "upload", data, purpose[:64])


@router.get("/v1/files")
async def list_files(
    request: Request,
    who: Caller = Depends(caller),
    limit: int = 20,
    order: str = "desc",
    after: str | None = None,
    purpose: str | None = None,
):
    any_write(who, "listing uploaded files")
    docs = docs_of(request)
    files = [
        f for f in docs.catalog.files() if (purpose is None or f["purpose"] == purpose) and file_readable(docs, who, f["id"])
    ]
    return views.page(files, limit, order, after)


@router.get("/v1/files/{file_id}")
async def get_file(request: Request, file_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    found = indexed.file_object(docs, who, file_id)  # a served index's document: any key that reads its index
    if found is not None:
        return found
    any_write(who, "reading an uploaded file")
    meta = docs.catalog.file(file_id)
    if meta is None or not file_readable(docs, who, file_id):
        raise ApiError(404, f"no file {file_id!r}", code="not_found")
    return meta


@router.delete("/v1/files/{file_id}")
async def delete_file(request: Request, file_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    any_write(who, "deleting files")
    visible_file(docs, who, file_id)  # a file the caller may not read is missing: it is not deleted
    holding = docs.catalog.stores_holding(file_id)
    for store_id in holding:
        writable(who, store_id)
    for store_id in holding:
        await detach(request, docs, store_id, file_id)
    docs.catalog.delete_file(file_id)
    return {"id": file_id, "object": "file", "deleted": True}


# -- vector stores -----------------------------------------------------------------
class StoreCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=256)
    metadata: dict[str, str] | None = None
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    chunking_strategy: dict[str, Any] | None = None
    expires_after: dict[str, Any] | None = None
    description: str | None = Field(None, max_length=512)


@router.post("/v1/vector_stores")
async def create_store(request: Request, body: StoreCreate, who: Caller = Depends(caller)):
    docs = docs_of(request)
    writable(who, ALL)
    check_chunking(body.chunking_strategy)
    expiry = check_expires_after(body.expires_after)
    if body.metadata and len(body.metadata) > 16:
        raise ApiError(400, "metadata holds at most 16 keys", param="metadata")
    limit = request.app.state.settings.max_vector_stores
    if len(docs.catalog.stores()) >= limit:
        raise ApiError(400, f"this server holds {limit} vector stores, its limit", code="too_many_vector_stores")
    files = [visible_file(docs, who, f, "file_ids") for f in body.file_ids]
    meta = docs.catalog.add_store(
        body.name or "",
        dict(body.metadata or {}) | ({"description": body.description} if body.description else {}),
        expires_after=expiry,
    )
    for f in files:
        attach(docs, meta["id"], f, {})
    return views.store_object(docs, meta)


@router.get("/v1/vector_stores")
async def list_stores(
    request: Request,
    who: Caller = Depends(caller),
    limit: int = 20,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
):
    docs = docs_of(request)
    stores = [
        views.store_object(docs, m, readable_for(docs, who, m["id"])) for m in docs.catalog.stores() if allows(who.scope, m["id"])
    ]
    return views.page(stores, limit, order, after, before)


@router.get("/v1/vector_stores/{store_id}")
async def get_store(request: Request, store_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    return views.store_object(docs, readable_store(request, who, store_id), readable_for(docs, who, store_id))


@router.delete("/v1/vector_stores/{store_id}")
async def delete_store(request: Request, store_id: str, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    if store_id in docs.catalog.served:
        raise ApiError(400, f"{store_id!r} is served with --index: stop serving it instead of deleting it", code="served_index")
    docs.registry.remove(store_id)
    docs.catalog.delete_store(store_id)
    return {"id": store_id, "object": "vector_store.deleted", "deleted": True}


# -- files in a vector store -------------------------------------------------------------
class StoreFileCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_id: str = Field(min_length=1, max_length=128)
    attributes: dict[str, Any] | None = None
    chunking_strategy: dict[str, Any] | None = None


@router.post("/v1/vector_stores/{store_id}/files")
async def add_store_file(request: Request, store_id: str, body: StoreFileCreate, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    check_chunking(body.chunking_strategy)
    meta = visible_file(docs, who, body.file_id, "file_id")  # attaching a hidden file would publish it
    existing = docs.catalog.entry(store_id, body.file_id)
    if existing is not None and existing["status"] != "failed":
        return views.public_entry(existing)
    return views.public_entry(attach(docs, store_id, meta, check_attributes(body.attributes)))


@router.get("/v1/vector_stores/{store_id}/files")
async def list_store_files(
    request: Request,
    store_id: str,
    who: Caller = Depends(caller),
    limit: int = 20,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
    filter: str | None = None,
):
    docs = docs_of(request)
    readable_store(request, who, store_id)
    if filter is not None and filter not in views.FILE_STATUSES:
        raise ApiError(400, f"filter must be one of {', '.join(views.FILE_STATUSES)}", param="filter")
    entries = [
        views.public_entry(e)
        for e in docs.catalog.entries(store_id)
        if (filter is None or e["status"] == filter) and entry_readable(docs, who, store_id, e["id"])
    ]
    if filter in (None, "completed"):  # a served index's own documents, after the uploads
        entries += await anyio.to_thread.run_sync(indexed.entries, docs, who, store_id)
    return views.page(entries, limit, order, after, before)


@router.get("/v1/vector_stores/{store_id}/files/{file_id}")
async def get_store_file(request: Request, store_id: str, file_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    readable_store(request, who, store_id)
    if indexed.find(docs, who, store_id, file_id) is not None:
        return indexed.entry(docs, store_id, file_id)
    entry = visible_entry(docs, who, store_id, file_id)
    headers = {"openai-poll-after-ms": "200"} if entry["status"] == "in_progress" else {}
    return JSONResponse(views.public_entry(entry), headers=headers)


@router.delete("/v1/vector_stores/{store_id}/files/{file_id}")
async def delete_store_file(request: Request, store_id: str, file_id: str, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    visible_entry(docs, who, store_id, file_id)
    await detach(request, docs, store_id, file_id)
    return {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}
