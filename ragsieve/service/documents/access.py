"""Who may do what in the documents API: the data folder on, the store visible to the key, write scopes."""

from __future__ import annotations

import asyncio

from fastapi import Request

from ragsieve.service.auth.keys import ALL, allows, may_write
from ragsieve.service.auth.scope import Caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents.ingest import QueueFull


def docs_of(request: Request):
    docs = request.app.state.documents
    if docs is None:
        raise ApiError(400, "the documents API is off: start `ragsieve serve` with --data-dir DIR", code="documents_disabled")
    return docs


def readable_store(request: Request, who: Caller, store_id: str) -> dict:
    meta = docs_of(request).catalog.store(store_id)
    if meta is None or not allows(who.scope, store_id):
        raise ApiError(404, f"no vector store {store_id!r} (or not for this key)", code="not_found")
    return meta


def writable(who: Caller, index: str) -> None:
    if not may_write(who.scope, index):
        what = "every index (create vector stores)" if index == ALL else f"{index!r}"
        raise ApiError(403, f"this API key may read but not change {what}: its scope needs '{index}:write'", code="read_only_key")


def writable_store(request: Request, who: Caller, store_id: str):
    """The documents service, once `who` may see store `store_id` (else 404) and change it (else 403)."""
    docs = docs_of(request)
    readable_store(request, who, store_id)
    writable(who, store_id)
    return docs


def any_write(who: Caller, doing: str = "uploading or deleting files") -> None:
    """403 unless the key writes somewhere: uploaded files (`/v1/files`) are the writers' own, so `doing`
    (what the route does: listing, reading, uploading) says what the key was refused."""
    if not any(s.endswith(":write") for s in who.scope):
        raise ApiError(
            403,
            f"this API key is read-only: {doing} needs a key with ':write' in its scope "
            f"(uploaded files are listed and read by the keys that may upload them)",
            code="read_only_key",
        )


def submit(docs, kind: str, store_id: str, **params) -> dict:
    try:
        return docs.ingestor.submit(kind, store_id, **params)
    except QueueFull as exc:
        raise ApiError(429, str(exc), code="ingest_queue_full", headers={"Retry-After": "5"}) from None


async def finished(job: dict, timeout_s: float) -> dict:
    ends = asyncio.get_running_loop().time() + timeout_s
    while job["status"] in ("queued", "running"):
        if asyncio.get_running_loop().time() > ends:
            raise ApiError(
                504,
                f"job {job['id']} did not finish within {timeout_s:g}s; it goes on in the background (GET /v1/jobs/{job['id']})",
                code="timeout",
            )
        await asyncio.sleep(0.05)
    return job
