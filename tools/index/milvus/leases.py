"""Reader leases on Milvus generations: a question in flight on generation G finishes on G.

A `MilvusIndex` showing generation G of collection C holds a lease
(`ragsieve.tools.index.local.readers.ReaderLease`, a shared `flock`) on
`<index>/milvus-leases/<C>@<G>/.readers` from open to close, in whatever process
it runs (a Milvus server is shared by many). Publishing then keeps what such a
reader can still show:

- rows retired by generation D (`died = D`) are visible to readers of
  generations below D: the publish that would delete them (by the primary keys
  the retiring publish recorded) deletes only those no held lease can show; the
  rest stay listed in the pointer (`pending_expiry`) and the next publish tries
  again;
- a collection replaced by a full copy (`--rebuild`) is dropped only when no
  lease on it is held; until then it is listed in `pending_drop`.

Taking a lease races with a publish, so `hold` re-reads the pointer after locking
and retries when it moved: a lease it returns names the generation the pointer
showed after the lock was taken, which no publish can have expired yet. Lease
folders of generations below the shown one that nobody holds are removed by the
publisher (`sweep`); the kernel drops a killed reader's lock.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from ragsieve.tools.index.local.readers import ReaderLease, in_use

log = logging.getLogger(__name__)

LEASES = "milvus-leases"
TRIES = 5  # pointer moves while a reader takes its lease: bounded retries


def lease_dir(root: Path, collection: str, generation: int) -> Path:
    return Path(root) / LEASES / f"{collection}@{int(generation)}"


def hold(root: Path, read_pointer: Callable[[], dict]) -> tuple[dict, ReaderLease | None]:
    """(pointer, lease): a lease on the generation `read_pointer()` shows, confirmed by reading it again."""
    pointer = read_pointer()
    for _ in range(TRIES):
        if "visible" not in pointer:  # a collection published before stable rows: nothing is expired by rows
            return pointer, None
        folder = lease_dir(root, pointer["collection"], pointer["visible"])
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only index folder: no lease (the publisher cannot see this reader)
            log.warning("no Milvus reader lease in %s (%s): a concurrent publish may expire rows it shows", root, exc)
            return pointer, None
        lease = ReaderLease(folder)
        again = read_pointer()
        if (again.get("collection"), again.get("visible")) == (pointer["collection"], pointer["visible"]):
            return again, lease
        lease.release()
        pointer = again
    log.warning("index %s: the Milvus pointer kept moving; reading generation %s without a lease", root, pointer.get("visible"))
    return pointer, None


def held(root: Path) -> list[tuple[str, int]]:
    """(collection, generation) of every lease some reader (any process) holds now."""
    out: list[tuple[str, int]] = []
    folder = Path(root) / LEASES
    if not folder.is_dir():
        return out
    for d in folder.iterdir():
        collection, _, gen = d.name.rpartition("@")
        if collection and gen.isdigit() and in_use(d):
            out.append((collection, int(gen)))
    return out


def expirable(pending: list[dict], collection: str, leases: list[tuple[str, int]]) -> tuple[list[dict], list[dict]]:
    """Split `pending` ({"died": D, "file": ...}) into (deletable now, kept): rows dead from D on are shown by a
    held generation g < D of `collection`."""
    gens = [g for c, g in leases if c == collection]
    now: list[dict] = []
    kept: list[dict] = []
    for entry in pending:
        (kept if any(g < int(entry["died"]) for g in gens) else now).append(entry)
    return now, kept


def sweep(root: Path, live: str, shown: int, leases: list[tuple[str, int]]) -> None:
    """Remove lease folders nobody holds: other collections' and generations below `shown` of `live`."""
    folder = Path(root) / LEASES
    if not folder.is_dir():
        return
    keep = set(leases)
    for d in folder.iterdir():
        collection, _, gen = d.name.rpartition("@")
        if not gen.isdigit() or (collection, int(gen)) in keep:
            continue
        if collection != live or int(gen) < shown:
            shutil.rmtree(d, ignore_errors=True)
