"""Changing and reading back what was uploaded: OpenAI's update and content routes.

`POST /v1/vector_stores/{id}` (name, metadata, expires_after), `POST /v1/vector_stores/{id}/files/{file_id}`
(attributes: used by search filters and `where.attributes` from the next question on),
`GET /v1/files/{id}/content` (the bytes as uploaded), `GET /v1/vector_stores/{id}/files/{file_id}/content`
(the text ragsieve extracted and indexed, chunk by chunk).
"""

from __future__ import annotations

import mimetypes
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents import indexed, views
from ragsieve.service.documents.access import any_write, docs_of, readable_store, writable_store
from ragsieve.service.documents.catalog import write_json
from ragsieve.service.documents.expiry import check_expires_after
from ragsieve.service.documents.filters import MAX_ATTRIBUTES, check_attributes
from ragsieve.service.documents.readable import entry_readable, file_readable, record_access, visible_entry

router = APIRouter()


class StoreUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=256)
    metadata: dict[str, str] | None = None
    expires_after: dict[str, Any] | None = None


@router.post("/v1/vector_stores/{store_id}")
async def update_store(request: Request, store_id: str, body: StoreUpdate, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    expiry = check_expires_after(body.expires_after)
    if "expires_after" in body.model_fields_set and store_id in docs.catalog.served:
        raise ApiError(400, f"{store_id!r} is served with --index: it does not expire", param="expires_after")
    if body.metadata is not None and (
        len(body.metadata) > MAX_ATTRIBUTES or any(len(k) > 64 or len(v) > 512 for k, v in body.metadata.items())
    ):
        raise ApiError(400, "metadata holds at most 16 keys of up to 64 characters, values up to 512", param="metadata")
    with docs.catalog.locked():
        meta = readable_store(request, who, store_id)
        if body.name is not None:
            meta["name"] = body.name
        if body.metadata is not None:
            meta["metadata"] = dict(body.metadata)
        if "expires_after" in body.model_fields_set:  # null: never expires again
            meta["expires_after"] = expiry
        write_json(docs.catalog.store_dir(store_id) / "meta.json", meta)
    return views.store_object(docs, meta)


class StoreFileUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attributes: dict[str, Any] | None


@router.post("/v1/vector_stores/{store_id}/files/{file_id}")
async def update_store_file(request: Request, store_id: str, file_id: str, body: StoreFileUpdate, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    attributes = check_attributes(body.attributes)  # bad input first: a 400 says nothing of the file
    visible_entry(docs, who, store_id, file_id)  # a file the caller may not read is missing: nothing changes
    record_access(docs, store_id, file_id, attributes)
    entry = docs.catalog.update_entry(store_id, file_id, lambda e: e | {"attributes": attributes})
    if entry is None:
        raise ApiError(404, f"no file {file_id!r} in vector store {store_id!r}", code="not_found")
    return views.public_entry(entry)


@router.get("/v1/files/{file_id}/content")
async def file_content(request: Request, file_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    any_write(who, "reading an uploaded file's content")
    meta = docs.catalog.file(file_id)
    path = None if meta is None or not file_readable(docs, who, file_id) else docs.catalog.file_path(meta)
    if path is None or not path.is_file():
        raise ApiError(404, f"no file {file_id!r}", code="not_found")
    media = mimetypes.guess_type(meta["filename"])[0] or "application/octet-stream"
    return FileResponse(path, media_type=media, filename=meta["filename"])


def _indexed_text(live, doc_id: str) -> list[str]:
    with live.pinned() as orch:
        return [c.text for c in orch.index.store.chunks_of(doc_id)]


@router.get("/v1/vector_stores/{store_id}/files/{file_id}/content")
async def store_file_content(request: Request, store_id: str, file_id: str, who: Caller = Depends(caller)):
    docs = docs_of(request)
    readable_store(request, who, store_id)
    found = indexed.find(docs, who, store_id, file_id)  # a served index's document (indexed.py)
    if found is not None:
        texts = await anyio.to_thread.run_sync(indexed.texts, docs, store_id, found[0])
        return {
            "object": "vector_store.file_content.page",
            "data": [{"type": "text", "text": t} for t in texts],
            "has_more": False,
            "next_page": None,
        }
    entry = docs.catalog.entry(store_id, file_id)
    meta = docs.catalog.file(file_id)
    if entry is None or meta is None or not entry_readable(docs, who, store_id, file_id):
        raise ApiError(404, f"no file {file_id!r} in vector store {store_id!r}", code="not_found")
    if entry["status"] != "completed":
        raise ApiError(409, f"file {file_id!r} is {entry['status']}: its content is there once it is completed", code="not_ready")
    live = docs.registry.orchestrators.get(store_id)
    texts = [] if live is None else await anyio.to_thread.run_sync(_indexed_text, live, f"{file_id}/{meta['filename']}")
    return {
        "object": "vector_store.file_content.page",
        "data": [{"type": "text", "text": t} for t in texts],
        "has_more": False,
        "next_page": None,
    }
