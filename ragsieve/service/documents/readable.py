"""Who may read which uploaded file: the `access` attribute becomes the file's access list, and the file
routes show a caller only what it may read (a forbidden file reads exactly as a missing one).

`{"attributes": {"access": "group:finance, user:cfo@example.com"}}` on a store file labels its chunks
(`ragsieve.tools.access.labels`, the `attributes` layer, which wins over rules and front matter); without
the attribute the index's rules, front matter or default decide.
"""

from __future__ import annotations

from collections.abc import Callable

from ragsieve.service.auth.keys import allows
from ragsieve.service.auth.scope import Caller
from ragsieve.service.common.errors import ApiError
from ragsieve.tools.access.labels import load, set_attribute
from ragsieve.tools.access.principals import may_read, principals
from ragsieve.tools.errors import UsageError

ATTRIBUTE = "access"


def record_access(docs, store_id: str, file_id: str, attributes: dict) -> None:
    """Label the file's chunks from its `access` attribute, before they are indexed (400 on a bad one)."""
    value = attributes.get(ATTRIBUTE)
    readers = None
    if value is not None:
        try:
            if not isinstance(value, str):
                raise UsageError("the access attribute is a string of principals")
            readers = principals(value)
        except UsageError as exc:
            raise ApiError(400, f"attributes.access: {exc}", param="attributes") from None
    set_attribute(docs.catalog.index_dir(store_id), f"{file_id}/", readers)


def entry_readable(docs, who: Caller, store_id: str, file_id: str) -> bool:
    if who.readers is None:
        return True
    meta = docs.catalog.file(file_id)
    source = f"{file_id}/{meta['filename']}" if meta else f"{file_id}/"
    return may_read(load(docs.catalog.index_dir(store_id)).decide(source).readers, who.readers)


def file_readable(docs, who: Caller, file_id: str) -> bool:
    """Whether the caller may read an uploaded file: readable in some store its key reaches."""
    if who.readers is None:
        return True
    return any(
        allows(who.scope, s["id"])
        and docs.catalog.entry(s["id"], file_id) is not None
        and entry_readable(docs, who, s["id"], file_id)
        for s in docs.catalog.stores()
    )


def visible_file(docs, who: Caller, file_id: str, param: str | None = None) -> dict:
    """The file's metadata, or the 404 of a missing file when it is missing or the caller may not read it (a
    write names a file the way a read does: a hidden file is neither changed nor confirmed to exist). A file
    in no store yet (a fresh upload) carries no access list: any key that writes may attach or delete it."""
    meta = docs.catalog.file(file_id)
    if meta is None or (docs.catalog.stores_holding(file_id) and not file_readable(docs, who, file_id)):
        raise ApiError(404, f"no file {file_id!r}", code="not_found", param=param)
    return meta


def visible_entry(docs, who: Caller, store_id: str, file_id: str) -> dict:
    """A store's file entry, or the 404 of a missing one when the caller may not read it."""
    entry = docs.catalog.entry(store_id, file_id)
    if entry is None or not entry_readable(docs, who, store_id, file_id):
        raise ApiError(404, f"no file {file_id!r} in vector store {store_id!r}", code="not_found")
    return entry


def readable_for(docs, who: Caller, store_id: str) -> Callable[[str], bool] | None:
    """A test of a store's file ids for this caller (None: it reads everything)."""
    if who.readers is None:
        return None
    return lambda file_id: entry_readable(docs, who, store_id, file_id)
