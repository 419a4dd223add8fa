"""The documents of a served index (`ragsieve serve --index NAME=DIR`, indexed by `ragsieve index`) as files
of the vector store NAME, so an OpenAI-SDK app follows a search hit to its file.

Such a document has no upload: its file id is `file-ix-` and 24 hex digits of a hash of (store, document id),
URL-safe and stable while the document is indexed (a path such as `docs/billing.md` cannot be a path
parameter). `GET /v1/vector_stores/NAME/files` lists them after the uploaded files; `.../files/{id}`,
`.../files/{id}/content` and `GET /v1/files/{id}` (its `filename` is the cited source) read them. They are
read-only here: `ragsieve index` / `ragsieve remove` change them. A caller reading as principals sees only
those its principals may read. The id table is computed once per index generation.
"""

from __future__ import annotations

import hashlib
import threading

from ragsieve.service.auth.keys import allows
from ragsieve.service.auth.scope import Caller

PREFIX = "file-ix-"
_LOCK = threading.Lock()
_TABLES: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}  # (store, generation) -> {file id: (doc, source)}


def indexed_id(store_id: str, doc_id: str) -> str:
    return PREFIX + hashlib.sha256(f"{store_id}\0{doc_id}".encode()).hexdigest()[:24]


def table(docs, store_id: str) -> dict[str, tuple[str, str]]:
    """{file id: (document id, source)} of the served index's documents that are not uploads."""
    live = docs.registry.orchestrators.get(store_id)
    if store_id not in docs.catalog.served or live is None:
        return {}
    with live.pinned() as orch:
        key = (store_id, live.generation)
        with _LOCK:
            known = _TABLES.get(key)
        if known is not None:
            return known
        store = orch.index.store
        uploads = {e["id"] for e in docs.catalog.entries(store_id)}
        source_of = getattr(store, "source_of", None)
        made = {}
        for doc_id in store.documents():
            if doc_id.partition("/")[0] in uploads:
                continue
            made[indexed_id(store_id, doc_id)] = (doc_id, source_of(doc_id) if source_of else doc_id)
    with _LOCK:
        for old in [k for k in _TABLES if k[0] == store_id]:
            del _TABLES[old]  # one generation per store is kept
        _TABLES[key] = made
    return made


def _readable(docs, who: Caller, store_id: str):
    if who.readers is None:
        return lambda source: True
    from ragsieve.tools.access.labels import load

    return load(docs.catalog.index_dir(store_id)).grant(who.readers)


def entries(docs, who: Caller, store_id: str) -> list[dict]:
    """The served index's documents as `vector_store.file` objects, those the caller may read."""
    readable = _readable(docs, who, store_id)
    return [entry(docs, store_id, fid) for fid, (_, source) in table(docs, store_id).items() if readable(source)]


def find(docs, who: Caller, store_id: str, file_id: str) -> tuple[str, str] | None:
    """(document id, source) of an indexed file the caller may read in `store_id`, else None."""
    if not file_id.startswith(PREFIX):
        return None
    found = table(docs, store_id).get(file_id)
    return found if found is not None and _readable(docs, who, store_id)(found[1]) else None


def entry(docs, store_id: str, file_id: str) -> dict:
    live = docs.registry.orchestrators[store_id]
    return {
        "id": file_id,
        "object": "vector_store.file",
        "created_at": int(live.opened),
        "vector_store_id": store_id,
        "status": "completed",
        "last_error": None,
        "usage_bytes": 0,
        "attributes": {},
        "chunking_strategy": {"type": "other"},
    }


def file_object(docs, who: Caller, file_id: str) -> dict | None:
    """`GET /v1/files/{id}` of an indexed document: in a served store the caller reaches and may read."""
    for store_id in docs.catalog.served:
        found = find(docs, who, store_id, file_id) if allows(who.scope, store_id) else None
        if found is not None:
            live = docs.registry.orchestrators[store_id]
            return {
                "id": file_id,
                "object": "file",
                "bytes": 0,
                "created_at": int(live.opened),
                "filename": found[1],
                "purpose": "assistants",
                "status": "processed",
                "status_details": None,
            }
    return None


def texts(docs, store_id: str, doc_id: str) -> list[str]:
    with docs.registry.orchestrators[store_id].pinned() as orch:
        return [c.text for c in orch.index.store.chunks_of(doc_id)]
