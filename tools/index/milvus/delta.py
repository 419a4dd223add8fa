"""Incremental publishes into a live Milvus collection: O(k) rows written and retired for k changed documents.

The local builder records, per generation, the rows that differ from its base
(`changes.json`, `ragsieve.tools.index.building.generation_writer`). Publishing
generation G on a collection that shows generation B follows those records back
from G to B (each generation keeps the one it replaced, so the chain is one or
two links long), then, under the visibility rule of
`ragsieve.tools.index.milvus.rows`:

1. undo what a killed publish left (`born > B` deleted, `died` in (B, ALIVE)
   restored to ALIVE) and delete rows dead before B (no reader can show them);
2. re-write the B entities of the changed and dropped rows with `died = G`;
3. insert the changed rows' G entities (`born = G`); flush;
4. the caller switches the pointer to G.

Until step 4 every reader filters by B and sees B whole; after it, G whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragsieve.tools.index.building.generation_writer import read_changes
from ragsieve.tools.index.milvus.client import Client
from ragsieve.tools.index.milvus.local import Local
from ragsieve.tools.index.milvus.rows import ALIVE, entities, visible_at

log = logging.getLogger(__name__)

BATCH = 1000  # rows per query/insert (Milvus caps a query at 16,384 results)
ALL_FIELDS = [
    "pk",
    "row",
    "born",
    "died",
    "doc_id",
    "chunk_index",
    "text",
    "search_text",
    "source",
    "title",
    "kind",
    "symbol",
    "line_start",
    "line_end",
    "text_hash",
    "doc_hash",
    "tenant",
    "dense",
]


def delta_since(root: Path, base: str, current: Path) -> tuple[set[int], set[int]] | None:
    """(rows of `current` to write, rows of `base` to retire) when `changes.json` links `current` back to the
    generation folder name `base`; None when the chain is broken (then publish everything)."""
    changed: set[int] = set()
    gen, n_now, steps = current, None, 0
    while gen.name != base:
        changes = read_changes(gen)
        if changes is None or steps > 8:
            return None
        n_now = changes["rows"] if n_now is None else n_now
        changed |= set(changes["changed"])
        gen, steps = root / changes["base"], steps + 1
        if gen.name != base and not gen.is_dir():
            return None
        base_rows = changes["base_rows"]
    if n_now is None:
        return set(), set()
    write = {r for r in changed if r < n_now} | set(range(base_rows, n_now))
    retire = {r for r in changed if r < base_rows} | set(range(n_now, base_rows))
    return write, retire


def recover(
    client: Client,
    collection: str,
    base: int,
    undo: bool = True,
    expired: list[int] | None = None,
    oldest_held: int | None = None,
) -> dict:
    """Undo a killed publish's writes (`undo`: an intent file says one was under way; it never switched the
    pointer) and delete the rows dead before `base` (by primary key when the last publish recorded them,
    `expired`; else by filter, a scan on engines without scalar indexes) that no reader still shows: with
    `oldest_held` (the oldest generation a reader leases, `milvus.leases`) the filter keeps rows alive then."""
    undone = restored = 0
    if undo or expired is None:  # these read the collection (writes and deletes by key do not)
        client.load_collection(collection)
    if undo:
        undone = _count(client, collection, f"born > {base}")
        if undone:
            client.delete(collection, filter=f"born > {base}")
        marked = _query_all(client, collection, f"died > {base} and died < {ALIVE}")
        for start in range(0, len(marked), BATCH):
            client.upsert(collection, [_with(e, died=ALIVE) for e in marked[start : start + BATCH]])
        restored = len(marked)
        if undone or marked:
            log.warning("Milvus %s: undid an interrupted publish (%d rows removed, %d restored)", collection, undone, restored)
    if expired is None:
        client.delete(collection, filter=f"died <= {min(base, oldest_held) if oldest_held is not None else base}")
    else:
        for start in range(0, len(expired), BATCH):
            client.delete(collection, ids=expired[start : start + BATCH])
    return {"undone": undone, "restored": restored, "expired": None if expired is None else len(expired)}


def apply_delta(
    client: Client,
    collection: str,
    local: Local,
    base: int,
    generation: int,
    write: set[int],
    retire: set[int],
    tenant: str,
    stem: bool,
    known: list[dict] | None = None,
) -> dict:
    """Steps 2 and 3 of the module doc; returns the counts written and retired. `known`: the live entities of
    the `retire` rows, rebuilt without reading the collection (`milvus.born`); else they are queried."""
    old = list(known) if known is not None else []
    wanted = sorted(retire) if known is None else []
    if wanted:
        client.load_collection(collection)  # (a restarted milvus-lite server has it released)
    for start in range(0, len(wanted), BATCH):
        part = wanted[start : start + BATCH]
        old.extend(_query_all(client, collection, f"{visible_at(base)} and row in {part}"))
    for start in range(0, len(old), BATCH):
        client.upsert(collection, [_with(e, died=generation) for e in old[start : start + BATCH]])
    retired_ids = [int(e["pk"]) for e in old]
    rows = sorted(write)
    for start in range(0, len(rows), BATCH):
        client.insert(collection, entities(local, rows[start : start + BATCH], tenant, stem, generation))
    client.flush(collection)
    return {"rows_written": len(rows), "rows_retired": len(old), "retired_ids": retired_ids}


def _with(entity: dict, **changes: Any) -> dict:
    out = {k: entity[k] for k in ALL_FIELDS if k in entity}
    out["dense"] = [float(x) for x in out["dense"]]
    out.update(changes)
    return out


def _count(client: Client, collection: str, expr: str) -> int:
    found = client.query(collection, filter=expr, output_fields=["count(*)"])
    return int(found[0]["count(*)"]) if found else 0


def _query_all(client: Client, collection: str, expr: str) -> list[dict]:
    """Every entity matching `expr`, all fields."""
    return [e for page in query_pages(client, collection, expr) for e in page]


def query_pages(
    client: Client, collection: str, expr: str, fields: list[str] = ALL_FIELDS, batch: int = BATCH
) -> Iterator[list[dict]]:
    """The entities matching `expr` (`fields` of each), page by page through a query iterator: no 16,384-result
    cap, and a caller that folds the pages never holds them all."""
    it = client.query_iterator(collection, batch_size=batch, filter=expr, output_fields=fields)
    try:
        while page := it.next():
            yield page
    finally:
        it.close()
