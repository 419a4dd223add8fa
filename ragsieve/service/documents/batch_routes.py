"""OpenAI's vector store file batches: several files attached at once, polled and cancelled as one.

`POST /v1/vector_stores/{id}/file_batches`, `GET .../file_batches/{batch_id}`,
`POST .../file_batches/{batch_id}/cancel`, `GET .../file_batches/{batch_id}/files`.
A batch is a record of its file ids; its status and counts are those of its
files' records in the store (so every worker process answers the same). A
batch is `in_progress` while one of its files is, then `completed` (even with
failed files, as OpenAI's) or `cancelled`. Cancelling marks its waiting files
`cancelled`: they are not built, or taken out again if their build had begun.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents import views
from ragsieve.service.documents.access import docs_of, readable_store, writable, writable_store
from ragsieve.service.documents.attach import attach, check_chunking, check_room
from ragsieve.service.documents.filters import check_attributes
from ragsieve.service.documents.readable import entry_readable, visible_file
from ragsieve.service.documents.search_routes import WORKER_HEADER

router = APIRouter()
MAX_BATCH = 500  # OpenAI's limit of file ids in one batch
STATUSES = views.FILE_STATUSES


class BatchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_id: str = Field(min_length=1, max_length=128)
    attributes: dict[str, Any] | None = None
    chunking_strategy: dict[str, Any] | None = None


class BatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_ids: list[str] | None = Field(None, max_length=MAX_BATCH)
    files: list[BatchFile] | None = Field(None, max_length=MAX_BATCH)
    attributes: dict[str, Any] | None = None
    chunking_strategy: dict[str, Any] | None = None


def batch_object(docs, batch: dict) -> dict:
    entries = [docs.catalog.entry(batch["vector_store_id"], f) for f in batch["file_ids"]]
    entries = [e for e in entries if e is not None]  # a file detached since is no longer counted
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in STATUSES} | {"total": len(batch["file_ids"])}
    status = "cancelled" if batch["cancelled"] else "in_progress" if counts["in_progress"] else "completed"
    return {
        "id": batch["id"],
        "object": "vector_store.files_batch",
        "created_at": batch["created_at"],
        "vector_store_id": batch["vector_store_id"],
        "status": status,
        "file_counts": counts,
    }


def _batch(request: Request, who: Caller, store_id: str, batch_id: str) -> tuple[Any, dict]:
    docs = docs_of(request)
    readable_store(request, who, store_id)
    batch = docs.catalog.batch(store_id, batch_id)
    if batch is None:
        raise ApiError(404, f"no file batch {batch_id!r} in vector store {store_id!r}", code="not_found")
    return docs, batch


@router.post("/v1/vector_stores/{store_id}/file_batches")
async def create_batch(request: Request, store_id: str, body: BatchCreate, who: Caller = Depends(caller)):
    docs = writable_store(request, who, store_id)
    if (body.file_ids is None) == (body.files is None):
        raise ApiError(400, "give either file_ids or files (not both, not neither)", param="file_ids")
    check_chunking(body.chunking_strategy)
    common = check_attributes(body.attributes)
    wanted = (
        [(f, common) for f in body.file_ids]
        if body.file_ids is not None
        else [(f.file_id, check_attributes(f.attributes) if f.attributes is not None else common) for f in body.files or []]
    )
    for f in body.files or []:
        check_chunking(f.chunking_strategy)
    if not wanted:
        raise ApiError(400, "a file batch needs at least one file", param="file_ids")
    if len({f for f, _ in wanted}) != len(wanted):
        raise ApiError(400, "a file appears twice in the batch", param="file_ids")
    metas = [visible_file(docs, who, f, "file_ids") for f, _ in wanted]  # a hidden file reads as missing
    fresh = [
        (m, a)
        for m, (_, a) in zip(metas, wanted)
        if (e := docs.catalog.entry(store_id, m["id"])) is None or e["status"] in ("failed", "cancelled")
    ]
    if fresh and docs.ingestor.pending() >= docs.ingestor.limit:  # a batch goes in whole, while the queue has room
        raise ApiError(
            429,
            f"the ingestion queue is full ({docs.ingestor.limit} jobs waiting); retry later",
            code="ingest_queue_full",
            headers={"Retry-After": "5"},
        )
    check_room(docs, store_id, sum(1 for m, _ in fresh if docs.catalog.entry(store_id, m["id"]) is None))
    batch = docs.catalog.add_batch(store_id, [m["id"] for m in metas])
    for meta, attributes in fresh:
        docs.catalog.drop_entry(store_id, meta["id"])  # a failed or cancelled earlier copy: its room is reused
        attach(docs, store_id, meta, attributes, batch_member=True)
    return batch_object(docs, batch)


@router.get("/v1/vector_stores/{store_id}/file_batches/{batch_id}")
async def get_batch(request: Request, store_id: str, batch_id: str, who: Caller = Depends(caller)):
    docs, batch = _batch(request, who, store_id, batch_id)
    out = batch_object(docs, batch)
    headers = {WORKER_HEADER: str(os.getpid())} | ({"openai-poll-after-ms": "200"} if out["status"] == "in_progress" else {})
    return JSONResponse(out, headers=headers)


@router.post("/v1/vector_stores/{store_id}/file_batches/{batch_id}/cancel")
async def cancel_batch(request: Request, store_id: str, batch_id: str, who: Caller = Depends(caller)):
    docs, batch = _batch(request, who, store_id, batch_id)
    writable(who, store_id)

    def cancel(entry: dict) -> dict | None:
        return entry | {"status": "cancelled"} if entry["status"] == "in_progress" else None

    with docs.catalog.locked():
        batch = docs.catalog.batch(store_id, batch_id) or batch
        if batch_object(docs, batch)["status"] == "in_progress":  # a finished batch stays as it ended
            batch["cancelled"] = True
            docs.catalog.put_batch(store_id, batch)
    if batch["cancelled"]:
        for file_id in batch["file_ids"]:
            docs.catalog.update_entry(store_id, file_id, cancel)
    return batch_object(docs, batch)


@router.get("/v1/vector_stores/{store_id}/file_batches/{batch_id}/files")
async def list_batch_files(
    request: Request,
    store_id: str,
    batch_id: str,
    who: Caller = Depends(caller),
    limit: int = 20,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
    filter: str | None = None,
):
    docs, batch = _batch(request, who, store_id, batch_id)
    if filter is not None and filter not in STATUSES:
        raise ApiError(400, f"filter must be one of {', '.join(STATUSES)}", param="filter")
    entries = [
        e
        for f in batch["file_ids"]
        if (e := docs.catalog.entry(store_id, f)) is not None and entry_readable(docs, who, store_id, f)
    ]
    entries.sort(key=lambda e: (e["created_at"], e["id"]))
    return views.page(
        [views.public_entry(e) for e in entries if filter is None or e["status"] == filter], limit, order, after, before
    )
