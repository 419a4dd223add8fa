"""The documents API's objects in OpenAI's shapes: lists, vector stores, their files, search results, jobs."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from ragsieve.agent.core.locations import deepest_location
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents.expiry import expires_at
from ragsieve.service.documents.indexed import indexed_id

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
        items = items[ids.index(after) + 1 :] if after in ids else []
    if before is not None:
        ids = [i["id"] for i in items]
        items = items[: ids.index(before)][-limit:] if before in ids else []
    chunk = items[:limit]
    return {
        "object": "list",
        "data": chunk,
        "first_id": chunk[0]["id"] if chunk else None,
        "last_id": chunk[-1]["id"] if chunk else None,
        "has_more": len(items) > limit,
    }


def served_bytes(folder) -> int:
    """The bytes of a served index's folder (every file under it), as its store's usage."""
    from pathlib import Path

    root = Path(folder)
    try:
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    except OSError:
        return 0


def store_object(docs, meta: dict, readable: Callable[[str], bool] | None = None) -> dict:
    """A vector store as OpenAI shows it; with `readable` (a caller reading as principals) its counts and
    size are those of the files the caller may read."""
    entries = docs.catalog.entries(meta["id"])
    if readable is not None:
        entries = [e for e in entries if readable(e["id"])]
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in FILE_STATUSES}
    counts["total"] = len(entries)
    live = docs.registry.orchestrators.get(meta["id"])
    usage = docs.usage_bytes(meta["id"]) if readable is None else sum(int(e.get("usage_bytes") or 0) for e in entries)
    # an index served with --index: its documents (not for a caller reading as principals, whose counts must not
    # reveal documents it may not read)
    if readable is None and meta["id"] in docs.catalog.served and live is not None:
        indexed = (live.index.manifest or {}).get("counts", {}).get("documents") or 0
        counts["completed"] += indexed
        counts["total"] += indexed
        usage += served_bytes(docs.catalog.index_dir(meta["id"]))
    return {
        "id": meta["id"],
        "object": "vector_store",
        "created_at": meta["created_at"] or int(live.opened if live else time.time()),
        "name": meta["name"],
        "usage_bytes": usage,
        "file_counts": counts,
        "status": "in_progress" if counts["in_progress"] else "completed",
        "last_active_at": docs.last_active(meta["id"]),
        "metadata": meta.get("metadata") or {},
        "expires_after": meta.get("expires_after"),
        "expires_at": expires_at(meta | {"last_active_at": docs.last_active(meta["id"])}),
    }


def new_entry(store_id: str, meta: dict, attributes: dict) -> dict:
    """A store file's record; `_attached` (private, never returned) tells this attachment from a later one of
    the same file, as `created_at` (whole seconds, as OpenAI's) cannot."""
    return {
        "id": meta["id"],
        "object": "vector_store.file",
        "created_at": int(time.time()),
        "_attached": secrets.token_hex(8),
        "vector_store_id": store_id,
        "status": "in_progress",
        "last_error": None,
        "usage_bytes": meta["bytes"],
        "attributes": attributes,
        "chunking_strategy": {"type": "other"},
    }  # OpenAI's type for a strategy it does not describe


def public_entry(entry: dict) -> dict:
    """A store file's record as OpenAI's `vector_store.file`: private fields dropped, `created_at` whole
    seconds and a response `chunking_strategy` (records written by earlier versions had a float and `auto`)."""
    out = {k: v for k, v in entry.items() if not k.startswith("_")}
    out["created_at"] = int(out.get("created_at") or 0)
    if (out.get("chunking_strategy") or {}).get("type") == "auto":
        out["chunking_strategy"] = {"type": "other"}
    return out


def last_error(message: str) -> dict:
    code = "unsupported_file" if any(u in message for u in UNSUPPORTED) else "invalid_file"
    return {"code": code, "message": message[:1000]}


def result_scores(hits, retrieval) -> list[float]:
    """Each hit's hybrid score in 0..1, never rising down the ranked list, so `score` orders the results and
    `score_threshold` keeps a top of the list. Weighted fusion's score is already in 0..1 (a weighted sum of
    min-max normalised BM25 and cosine scores, so relative to this query's candidates); reciprocal-rank fusion's
    is divided by its maximum, sum(weights) / (k + 1) (first in every list). A hit the symbol table put first
    scores as the best fused one (the running maximum from the bottom keeps the order)."""
    if retrieval.fusion == "rrf":
        top = (retrieval.bm25_weight + retrieval.dense_weight) / (retrieval.rrf_k + 1)
        raw = [h.score / top if top > 0 else 0.0 for h in hits]
    else:
        raw = [h.score for h in hits]
    out, floor = [], 0.0
    for value in reversed(raw):  # from the bottom: each score at least the one below it
        floor = max(floor, min(1.0, max(0.0, float(value))))
        out.append(floor)
    return out[::-1]


def search(docs, live, store_id: str, query: str, k: int, where, threshold: float) -> list[dict]:
    """Ranked by ragsieve's hybrid retrieval; `score` is the hybrid score (`result_scores`: 0..1, in the order
    of the results), which `score_threshold` applies to."""
    entries = {e["id"]: e for e in docs.catalog.entries(store_id)}
    with live.pinned() as orch:
        hits = orch.retrieve(query, top_k=k, where=where)
        if not hits:
            return []
        scores = result_scores(hits, orch.config.retrieval)
    out = []
    for hit, score in zip(hits, scores):
        if score < threshold:
            continue
        source = hit.chunk.source
        file_id, _, filename = source.partition("/")
        entry = entries.get(file_id)
        if entry is None:  # a document indexed by `ragsieve index`, not uploaded: its URL-safe id (indexed.py)
            file_id, filename = indexed_id(store_id, hit.chunk.doc_id), source
        out.append(
            {
                "file_id": file_id,
                "filename": filename,
                "score": round(float(score), 6),
                "attributes": (entry or {}).get("attributes") or {},
                "content": [{"type": "text", "text": hit.chunk.text}],
                "ragsieve": {
                    "location": deepest_location(filename, hit.chunk.symbol, hit.chunk.line_start, hit.chunk.line_end),
                    "line_start": hit.chunk.line_start,
                    "line_end": hit.chunk.line_end,
                    "symbol": hit.chunk.symbol,
                },
            }
        )
    return out
