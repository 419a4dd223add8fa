"""Which generation wrote each row's live Milvus entity: incremental publishes without reading the collection.

Retiring a row means re-writing its live entity with `died = G` under the same
primary key `born << 36 | row` (`milvus.rows`). Finding that entity by a query
needs the collection loaded — on milvus-lite every new process (each
`ragsieve index` run) loads it again, O(corpus) — and a filtered lookup. So the
pointer records the generation of the last full copy (`copy_generation`) and a
small file of the rows written since by incremental publishes with their
generation (`milvus-sparse/born-<gen>.npy`, rows x (row, born)): a retired
row's entity is rebuilt from the previous local generation (the one the
collection shows, kept by the local builder) with the recorded `born`, and no
read of the collection is needed. Without the previous local generation the
publish looks the rows up; a pointer written before the record (or with its
file unreadable) is looked up once and the record read from the collection
(`born_from_collection`), so the publishes after it read nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np

from ragsieve.tools.index.milvus.client import Client
from ragsieve.tools.index.milvus.delta import query_pages
from ragsieve.tools.index.milvus.local import LocalView, readable
from ragsieve.tools.index.milvus.pointer import SPARSE_DIR
from ragsieve.tools.index.milvus.rows import entities, visible_at
from ragsieve.tools.index.search import npy


def read_born(root: Path, pointer: dict) -> dict[int, int] | None:
    """row -> born for rows written since the last full copy; None when the pointer does not record them."""
    if "copy_generation" not in pointer:
        return None
    name = pointer.get("born_file")
    if not name:
        return {}
    try:
        pairs = npy.load(Path(root) / name).reshape(-1, 2)
    except (OSError, ValueError):
        return None
    return dict(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))


def next_born(born: dict[int, int], write: set[int], rows_now: int, generation: int) -> dict[int, int]:
    out = {r: b for r, b in born.items() if r < rows_now}
    out.update({r: int(generation) for r in write})
    return out


def write_born(root: Path, gen: str, born: dict[int, int]) -> str | None:
    if not born:
        return None

    folder = Path(root) / SPARSE_DIR
    folder.mkdir(exist_ok=True)
    tmp = folder / f".born-{gen}.npy.tmp"
    with open(tmp, "wb") as fh:
        np.save(fh, np.asarray(sorted(born.items()), dtype=np.int64).reshape(-1, 2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / f"born-{gen}.npy")
    return f"{SPARSE_DIR}/born-{gen}.npy"


def live_entities(
    root: Path, pointer: dict, born: dict[int, int] | None, rows: set[int], tenant: str, stem: bool
) -> list[dict] | None:
    """The entities the collection shows for `rows` at the pointer's generation, rebuilt from the local
    generation it was published from; None when that cannot be done (then query them)."""
    base = Path(root) / str(pointer.get("generation", ""))
    if born is None or not readable(base):
        return None
    view = LocalView(base)
    try:
        if any(r >= len(view) for r in rows):
            return None
        by_born: dict[int, list[int]] = {}
        for r in sorted(rows):
            by_born.setdefault(born.get(r, int(pointer["copy_generation"])), []).append(r)
        return [e for b, part in sorted(by_born.items()) for e in entities(view, part, tenant, stem, b)]
    finally:
        view.close()


def born_from_collection(client: Client, collection: str, generation: int) -> tuple[int, dict[int, int]]:
    """(copy_generation, row -> born) read once from the entities generation `generation` shows, for a pointer
    written before the born record: the most common `born` stands for the full copy, the other rows are
    recorded. O(corpus) once (the collection is loaded and every (row, born) pair read); every later publish
    then rebuilds retired entities without reading the collection."""
    client.load_collection(collection)
    pairs: dict[int, int] = {}
    for page in query_pages(client, collection, visible_at(generation), ["row", "born"], batch=16000):
        pairs.update((int(e["row"]), int(e["born"])) for e in page)
    if not pairs:
        return int(generation), {}
    copy = Counter(pairs.values()).most_common(1)[0][0]
    return int(copy), {r: b for r, b in pairs.items() if b != copy}
