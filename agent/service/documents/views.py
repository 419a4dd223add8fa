"""The documents API's objects in OpenAI's shapes: lists, vector stores, their files, search results, jobs."""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ragsieve.agent.service.documents.expiry import expires_at
from ragsieve.agent.service.errors import ApiError

UNSUPPORTED = ("unsupported file type", "unsupported")
FILE_STATUSES = ("in_progress", "completed", "failed", "cancelled")  # a vector store file's


def page(items: list[dict], limit: int, order: str, after: str | None, before: str | None = None) -> dict:
    """One page of `items` (oldest first) in OpenAI's cursor shape: after/before an id, `has_more`."""
    if not 1 <= limit <= 100:
        raise ApiError(400, "limit must be in 1..100", param="limit")
    if order not in ("asc", "desc"):
        raise ApiError(400, "order must be asc or desc", param="order")
    items = items if order == "asc" else list(reversed(items))
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    if before is not None:
        ids = [i["id"] for i in items]
        items = items[:ids.index(before)][-limit:] if before in ids else []
    chunk = items[:limit]
    return {"object": "list", "data": chunk, "first_id": chunk[0]["id"] if chunk else None,
            "last_id": chunk[-1]["id"] if chunk else None, "has_more": len(items) > limit}


def store_object(docs, meta: dict, readable: Callable[[str], bool] | None = None) -> dict:
    """A vector store as OpenAI shows it; with `readable` (a caller reading as principals) its counts and
    size are those of the files the caller may read."""
    entries = docs.catalog.entries(meta["id"])
    if readable is not None:
        entries = [e for e in entries if readable(e["id"])]
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in FILE_STATUSES}
    counts["total"] = len(entries)
    live = docs.registry.orchestrators.get(meta["id"])
    return {"id": meta["id"], "object": "vector_store", "created_at": meta["created_at"] or int(live.opened if live
                                                                                               else time.time()),
            "name": meta["name"], "file_counts": counts,
            "usage_bytes": docs.usage_bytes(meta["id"]) if readable is None else
            sum(int(e.get("usage_bytes") or 0) for e in entries),
            "status": "in_progress" if counts["in_progress"] else "completed",
            "last_active_at": docs.last_active(meta["id"]), "metadata": meta.get("metadata") or {},
            "expires_after": meta.get("expires_after"),
            "expires_at": expires_at(meta | {"last_active_at": docs.last_active(meta["id"])})}


def new_entry(store_id: str, meta: dict, attributes: dict) -> dict:
    return {"id": meta["id"], "object": "vector_store.file", "created_at": int(time.time() * 1000) / 1000,
            "vector_store_id": store_id, "status": "in_progress", "last_error": None,
            "usage_bytes": meta["bytes"], "attributes": attributes, "chunking_strategy": {"type": "auto"}}


def last_error(message: str) -> dict:
    code = "unsupported_file" if any(u in message for u in UNSUPPORTED) else "invalid_file"
    return {"code": code, "message": message[:1000]}


def search(docs, live, store_id: str, query: str, k: int, where, threshold: float) -> list[dict]:
    """Ranked by ragsieve's hybrid retrieval; `score` is the chunk's cosine similarity to the query (0..1),
    which `score_threshold` applies to."""
    entries = {e["id"]: e for e in docs.catalog.entries(store_id)}
    with live.pinned() as orch:
        hits = orch.retrieve(query, top_k=k, where=where)
        if not hits:
            return []
        vector = orch.index.embed_query(query)
        rows = np.asarray(orch.index.vectors[[h.row for h in hits]], dtype=np.float32)
        cosines = np.clip(rows @ vector, 0.0, 1.0)
    out = []
    for hit, score in zip(hits, cosines):
        if score < threshold:
            continue
        source = hit.chunk.source
        file_id, _, filename = source.partition("/")
        entry = entries.get(file_id)
        if entry is None:  # a document indexed by `ragsieve index`, not uploaded
            file_id, filename = source, source
        out.append({"file_id": file_id, "filename": filename, "score": round(float(score), 6),
                    "attributes": (entry or {}).get("attributes") or {},
                    "content": [{"type": "text", "text": hit.chunk.text}]})
    return out
