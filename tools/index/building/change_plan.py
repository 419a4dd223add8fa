"""What a build changes, found in O(documents given + documents in scope), not O(corpus).

The previous generation's chunk store is the persisted document manifest: its `documents` table (indexed by
doc_id, updated in the build's own transaction, so it is as atomic as the generation) answers the three
questions a build asks of the previous corpus without listing it:

* which of the documents given were indexed before, and with which content hash (`hashes_of`: lookups by id);
* which documents indexed before lie in a path given now (`ids_in_scopes`: a range scan per scope, `dir/` ->
  ids in ['dir/', 'dir0'), a file -> the id itself and ids in ['file#', 'file$')), the ones removed when gone;
* how many documents there were (the previous manifest's count), so the kept ones are counted, not listed.

The corpus fingerprint is kept the same way (`Fingerprint`): the sum modulo 2^256 of sha256(doc_id, content
hash) over the documents, so a change adds the new pairs and subtracts the old ones. `plan_change` returns None
where a build needs the whole list anyway (`sync`: every document not given is removed; changed chunking
settings: every kept document must be listed in the refusal) and the builder lists it as before.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.local.store import ChunkStore

if TYPE_CHECKING:
    from ragsieve.tools.types import Document

FINGERPRINT_KIND = "sha256-sum"  # manifest["corpus_fingerprint_kind"]: the fingerprint can be updated in place
_MOD = 1 << 256


def pair_hash(doc_id: str, content_hash: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{doc_id}\0{content_hash}".encode("utf-8")).digest(), "big")


def fingerprint_of(doc_hashes: dict[str, str]) -> str:
    """The corpus fingerprint of documents {doc_id: content_hash}: order-free, so it can be updated."""
    return format(sum(pair_hash(i, h) for i, h in doc_hashes.items()) % _MOD, "064x")


def updated_fingerprint(previous: str, removed: dict[str, str], added: dict[str, str]) -> str:
    total = int(previous, 16) - sum(pair_hash(i, h) for i, h in removed.items()) + sum(pair_hash(i, h) for i, h in added.items())
    return format(total % _MOD, "064x")


def hashes_of(store: ChunkStore, doc_ids: Iterable[str], part: int = 500) -> dict[str, str]:
    """{doc_id: content_hash} of those of `doc_ids` the store's generation holds (indexed lookups)."""
    ids = list(doc_ids)
    out: dict[str, str] = {}
    for start in range(0, len(ids), part):
        chunk = ids[start : start + part]
        marks = ",".join("?" * len(chunk))
        out.update(store._db.execute(f"SELECT doc_id, content_hash FROM documents WHERE doc_id IN ({marks}){store._vis}", chunk))
    return out


def _after(prefix: str) -> str:
    """The smallest string greater than every string starting with `prefix` (non-empty)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def ids_in_scopes(store: ChunkStore, scopes: Iterable[str]) -> dict[str, str]:
    """{doc_id: content_hash} of the documents `in_scope` of `scopes` (range scans on the doc_id index)."""
    out: dict[str, str] = {}
    sql = f"SELECT doc_id, content_hash FROM documents WHERE doc_id >= ? AND doc_id < ?{store._vis}"
    for s in scopes:
        if not s:
            continue
        if s.endswith("/"):
            out.update(store._db.execute(sql, (s, _after(s))))
        else:
            out.update(store._db.execute(sql, (s + "#", _after(s + "#"))))
            out.update(store._db.execute(f"SELECT doc_id, content_hash FROM documents WHERE doc_id = ?{store._vis}", (s,)))
    return out


def has_prefix(store: ChunkStore, prefix: str) -> bool:
    """Whether any document's id starts with `prefix` (non-empty): one range probe on the doc_id index."""
    return (
        store._db.execute(
            f"SELECT 1 FROM documents WHERE doc_id >= ? AND doc_id < ?{store._vis} LIMIT 1", (prefix, _after(prefix))
        ).fetchone()
        is not None
    )


def has_outside(store: ChunkStore, prefix: str) -> bool:
    """Whether any document's id does not start with `prefix` (non-empty): two range probes."""
    return (
        store._db.execute(
            f"SELECT 1 FROM documents WHERE (doc_id < ? OR doc_id >= ?){store._vis} LIMIT 1", (prefix, _after(prefix))
        ).fetchone()
        is not None
    )


def any_document(store: ChunkStore) -> str | None:
    r = store._db.execute(f"SELECT doc_id FROM documents WHERE 1{store._vis} LIMIT 1").fetchone()
    return r[0] if r else None


@dataclass
class ChangePlan:
    new_hashes: dict[str, str]  # the documents given: doc_id -> content hash
    before: dict[str, str]  # previous content hash of the given documents indexed before, and of the removed
    unchanged: set[str]
    removed: list[str]  # indexed before, in a path given now (or named by `remove`), not given now
    kept_count: int  # indexed before from other paths, left in place (counted, not listed)
    documents: int = 0  # documents of the new generation
    stats: dict = field(default_factory=dict)  # documents read from the store, for tests

    @functools.cached_property
    def dropped(self) -> list[str]:
        """Previous documents whose records and rows go: the changed ones and the removed ones."""
        return [i for i in self.new_hashes if i in self.before and i not in self.unchanged] + self.removed

    def counts(self) -> dict[str, int]:
        return {
            "docs_added": sum(1 for i in self.new_hashes if i not in self.before),
            "docs_updated": sum(1 for i in self.new_hashes if i in self.before and i not in self.unchanged),
            "docs_removed": len(self.removed),
            "docs_unchanged": len(self.unchanged),
            "docs_kept": self.kept_count,
        }

    def fingerprint(self, previous: str) -> str:
        changed = {i: h for i, h in self.new_hashes.items() if i not in self.unchanged}
        return updated_fingerprint(previous, {i: self.before[i] for i in self.dropped}, changed)


def plan_change(
    prev_store: ChunkStore, prev_manifest: dict, docs: Sequence[Document], scopes: Sequence[str], remove: set[str] | None
) -> ChangePlan:
    """The change a build of `docs` (covering `scopes`, removing `remove`) makes to the previous generation."""
    new_hashes = {d.doc_id: d.content_hash for d in docs}
    given = hashes_of(prev_store, new_hashes)
    in_scope = ids_in_scopes(prev_store, scopes)
    named = hashes_of(prev_store, remove or ())
    removed = sorted((set(in_scope) | set(named)) - set(new_hashes))
    before = given | {i: (in_scope | named)[i] for i in removed}
    unchanged = {i for i, h in new_hashes.items() if given.get(i) == h}
    previous = int(prev_manifest["counts"]["documents"])
    if previous < len(given) + len(removed):  # a manifest that miscounts: count the store's records instead
        previous = prev_store._db.execute(f"SELECT COUNT(*) FROM documents WHERE 1{prev_store._vis}").fetchone()[0]
    kept = previous - len(given) - len(removed)
    return ChangePlan(
        new_hashes=new_hashes,
        before=before,
        unchanged=unchanged,
        removed=removed,
        kept_count=kept,
        documents=kept + len(new_hashes),
        stats={"documents_read": len(given) + len(in_scope) + len(named)},
    )


def scope_test(scopes: Sequence[str]) -> Callable[[str], bool]:
    """`lambda doc_id: in_scope(doc_id, scopes)`, cheap enough to run over every document of a large index."""
    prefixes = tuple(s if s.endswith("/") else s + "#" for s in scopes)
    exact = {s for s in scopes if not s.endswith("/")}
    return lambda doc_id: doc_id in exact or doc_id.startswith(prefixes)


def listed_change(
    prev_store: ChunkStore | None,
    docs: Sequence[Document],
    scopes: Sequence[str],
    remove: set[str] | None,
    sync: bool,
    reuse: bool,
    prev_gen: Path | None = None,
) -> tuple[dict[str, str], set[str], list[str], dict[str, int]]:
    """(prev_docs, unchanged, kept, counts) from a listing of the previous generation's documents. When the
    chunking settings changed (`reuse` False, no `prev_store`) the previous generation `prev_gen` is still
    listed so that documents indexed from other paths are refused, not silently dropped."""
    prev_docs = prev_store.documents() if prev_store else {}
    new_hashes = {d.doc_id: d.content_hash for d in docs}
    if not reuse and not sync and prev_store is None and prev_gen is not None:
        listing = ChunkStore(prev_gen / "chunks.sqlite", read_only=True)
        try:
            before = listing.documents()
        finally:
            listing.close()
        scoped = scope_test(scopes)
        if any(i not in new_hashes and i not in (remove or set()) and not scoped(i) for i in before):
            others = sum(1 for i in before if i not in new_hashes and not scoped(i))
            raise UsageError(
                f"{others} documents indexed before are not in these paths and the chunking "
                f"settings changed: index them again too, or pass --sync to keep only these paths"
            )
    unchanged = {i for i, h in new_hashes.items() if prev_docs.get(i) == h}
    gone = [i for i in prev_docs if i not in new_hashes]
    # gone from a path indexed now: removed; indexed before from another path: kept (unless sync)
    scoped = scope_test(scopes)  # `in_scope` with one C-level startswith per document
    kept = [] if sync else [i for i in gone if i not in (remove or set()) and not scoped(i)]
    if kept and not reuse:
        raise UsageError(
            f"{len(kept)} documents indexed before are not in these paths and the chunking "
            f"settings changed: index them again too, or pass --sync to keep only these paths"
        )
    return (
        prev_docs,
        unchanged,
        kept,
        {
            "docs_added": sum(1 for i in new_hashes if i not in prev_docs),
            "docs_updated": sum(1 for i in new_hashes if i in prev_docs and i not in unchanged),
            "docs_removed": len(gone) - len(kept),
            "docs_unchanged": len(unchanged),
            "docs_kept": len(kept),
        },
    )


def ids_to_remove(gen: Path, prefixes: list[str], documents: int) -> set[str]:
    """The ids of generation `gen` that are one of `prefixes` or lie below one (`examples/docs` matches
    `examples/docs/...`), found by range scans on the store's doc_id index, not a listing of every document.
    A prefix matching nothing, or a removal of all `documents`, is refused."""
    store = ChunkStore(gen / "chunks.sqlite", read_only=True)
    try:
        wanted = [p.rstrip("/") for p in prefixes if p.strip()]
        found = {p: ids_in_scopes(store, [p, p + "/"]) for p in wanted}
        example = any_document(store)
    finally:
        store.close()
    hit = {i for ids in found.values() for i in ids}
    unmatched = [p for p in wanted if not found[p]]
    if unmatched:
        raise UsageError(f"no indexed document matches {unmatched} (ids look like {example!r})")
    if len(hit) >= documents:
        raise UsageError("that would remove every document; delete the index folder instead")
    return hit
