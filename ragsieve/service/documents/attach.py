"""Putting a file into a vector store (a queued ingestion job) and taking it out again."""

from __future__ import annotations

from fastapi import Request

from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents import views
from ragsieve.service.documents.access import finished, submit
from ragsieve.service.documents.ingest import QueueFull
from ragsieve.service.documents.readable import record_access

AUTO = {"type": "auto"}


def check_chunking(value: dict | None) -> None:
    if value not in (None, AUTO):
        raise ApiError(
            400,
            'only chunking_strategy {"type": "auto"} is supported: ragsieve chunks code by syntax '
            "and text by tokens (index.chunk_tokens in the server's config)",
            param="chunking_strategy",
        )


def check_room(docs, store_id: str, adding: int = 1) -> None:
    """Refuse (400) before anything is written: a Milvus-served index, or a store past its file limit."""
    if store_id in docs.catalog.served and (docs.catalog.index_dir(store_id) / "milvus.json").is_file():
        raise ApiError(
            400, f"{store_id!r} is served by Milvus: add files with `ragsieve index` then `ragsieve migrate`", code="milvus_index"
        )
    if len(docs.catalog.entries(store_id)) + adding > docs.settings.max_files_per_store:
        raise ApiError(400, f"the vector store holds at most {docs.settings.max_files_per_store} files", code="too_many_files")


def attach(docs, store_id: str, meta: dict, attributes: dict, *, batch_member: bool = False) -> dict:
    check_room(docs, store_id)
    record_access(docs, store_id, meta["id"], attributes)  # labelled before a chunk is indexed
    entry = views.new_entry(store_id, meta, attributes)
    docs.catalog.stage(store_id, meta)
    docs.catalog.put_entry(store_id, entry)
    docs.touch(store_id)
    try:
        docs.queue_add(store_id, entry, batch_member=batch_member)
    except QueueFull as exc:
        docs.catalog.drop_entry(store_id, meta["id"])
        raise ApiError(429, str(exc), code="ingest_queue_full", headers={"Retry-After": "5"}) from None
    return entry


async def detach(request: Request, docs, store_id: str, file_id: str) -> None:
    docs.catalog.drop_entry(store_id, file_id)
    job = submit(docs, "remove", store_id, file_id=file_id)
    await finished(job, request.app.state.settings.request_timeout_s)
    if job["error"]:
        raise ApiError(500, f"removing {file_id} from {store_id} failed: {job['error']}", code="server_error")
