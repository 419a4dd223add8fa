"""Writing the `milvus` backend: the live local generation published into a Milvus collection.

A collection holds every chunk: its text, metadata (`doc_id`, `source`, `kind`,
lines, `symbol`, `tenant`), the dense vector (FLAT or HNSW, inner product) and a
BM25 sparse vector computed by Milvus' own BM25 function, so BM25, dense and
hybrid search run server-side. `tenant` is the partition key. Rows keep the
local numbering, so the pipeline is unchanged.

BM25 input: Milvus analyses `search_text`, which holds the chunk's indexed text
already analysed by the local BM25 tokenizer (lowercase `\\w+`, bm25s English
stopwords removed, Snowball stems), one token per word; the analyzer is Milvus'
`standard` tokenizer, which keeps each such token whole. Queries are analysed
the same way before they are sent. An index built with identifier terms (`bm25.identifiers` in its
manifest, `ragsieve.tools.index.search.identifiers`) publishes them too, a dotted one spelled with `DOT` for its
dots (the `standard` tokenizer splits at "."); a pointer records the flag, and changing it is a full copy. Both backends therefore score the same
tokens with Lucene BM25 and k1, b from the index manifest. milvus-lite ignores
k1 and b and uses 1.5 / 0.75 (`bm25_params_applied`), so on it the BM25 rankings
still differ slightly unless the local index is built with those values. A
client querying the collection directly must analyse its query the same way
(`ragsieve.tools.index.search.bm25.tokenize`) and filter `born <= G and died > G`.

Two ways to publish, both switched by rewriting `<index>/milvus.json` atomically:
- incremental (the usual case): the rows the local change lists name are
  written and retired in the live collection under the visibility rule of
  `ragsieve.tools.index.milvus.rows` (`ragsieve.tools.index.milvus.delta`);
- full copy (first publish, `--rebuild`, changed chunking/BM25/vector settings,
  a broken change chain): a new collection `<name>_<gen>_<hex>`, loaded, the
  alias `<name>` moved to it, the pointer switched, the old collection dropped.
  An intent file names the collection being filled, so the next publish drops
  it if this one was killed.
Publishing runs under the index's write lock; `migrate` is a publish of an
existing local index: nothing is embedded again.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from pathlib import Path
from typing import Any

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.local.lock import IndexLock
from ragsieve.tools.index.milvus import born as milvus_born
from ragsieve.tools.index.milvus import leases
from ragsieve.tools.index.milvus.born import live_entities, next_born, read_born, write_born
from ragsieve.tools.index.milvus.client import Client, client_for, release_client  # noqa: F401  (client_for re-exported)
from ragsieve.tools.index.milvus.delta import apply_delta, delta_since, recover
from ragsieve.tools.index.milvus.local import Local, open_live
from ragsieve.tools.index.milvus.pointer import (
    INTENT,
    POINTER,
    SPARSE_DIR,
    read_pointer,
    resolve_uri,
    stored_uri,
    write_intent,
    write_pointer,
    write_sparse,
)
from ragsieve.tools.index.milvus.row_meta import write_row_metadata
from ragsieve.tools.index.milvus.rows import LAYOUT, entities, generation_number
from ragsieve.tools.index.milvus.schema import BM25_INPUT, bm25_params_applied, bm25_settings, create_collection
from ragsieve.tools.index.search import npy

log = logging.getLogger(__name__)

BATCH = 2000


def publish(
    root: str | Path,
    *,
    uri: str | None = None,
    token: str | None = None,
    name: str | None = None,
    tenant: str = "default",
    index_type: str = "FLAT",
    rebuild: bool = False,
    lock_wait_s: float | None = 300.0,
) -> dict:
    """Publish the live local generation of `root` to Milvus, under the index's write lock.

    Incremental when the collection shows a generation the local change lists lead back to (O(k) rows,
    `ragsieve.tools.index.milvus.delta`); otherwise, or with `rebuild`, a full copy into a new collection and
    an atomic switch. Publishing the generation already shown changes nothing (it only finishes or undoes an
    interrupted publish)."""
    root = Path(root)
    with IndexLock(root, lock_wait_s):
        return _publish_locked(
            root, uri=uri, token=token, name=name, tenant=tenant, index_type=index_type, rebuild=rebuild, wait_s=lock_wait_s
        )


def _publish_locked(
    root: Path,
    *,
    uri: str | None,
    token: str | None,
    name: str | None,
    tenant: str,
    index_type: str,
    rebuild: bool,
    wait_s: float | None,
) -> dict:
    previous = read_pointer(root) if (root / POINTER).is_file() else {}
    stored = stored_uri(root, uri) if uri else previous.get("uri") or "milvus.db"
    name = name or previous.get("name") or re.sub(r"\W", "_", root.resolve().name).strip("_") or "ragsieve"
    with open_live(root) as local:
        gen = local.path.name
        number = generation_number(gen)
        bm25 = bm25_settings(local.manifest)
        dim = int(local.vectors.shape[1])
        client = client_for(resolve_uri(root, stored), token, wait_s=wait_s)
        try:
            interrupted = _drop_abandoned(client, root, previous.get("collection"))
            held = leases.held(root)  # generations readers (any process) still show: kept whole
            pending_drop = _drop_unread(client, previous.get("pending_drop", []), held)
            same = (
                not rebuild
                and previous.get("layout") == LAYOUT
                and previous.get("uri") == stored
                and previous.get("name") == name
                and previous.get("tenant", "default") == tenant
                and previous.get("dimension") == dim
                and previous.get("index_type") == index_type
                and {k: previous.get("bm25", {}).get(k, False) for k in ("k1", "b", "stem", "identifiers", "compounds")}
                == {k: bm25[k] for k in ("k1", "b", "stem", "identifiers", "compounds")}
                and client.has_collection(previous["collection"])
            )
            delta = delta_since(root, previous["generation"], local.path) if same else None
            if delta is not None:
                collection = previous["collection"]
                expire_now, pending = leases.expirable(_pending_expiry(previous), collection, held)
                recovery = recover(
                    client,
                    collection,
                    int(previous["visible"]),
                    undo=interrupted.get("mode") == "incremental",
                    expired=_expired_ids(root, expire_now, pending),
                    oldest_held=min([g for c, g in held if c == collection], default=None),
                )
                write, retire = delta
                counts: dict[str, Any] = {"rows_written": 0, "rows_retired": 0}
                born = read_born(root, previous)
                if previous["generation"] != gen:
                    write_intent(root, {"mode": "incremental", "collection": collection, "target": gen})
                    counts = apply_delta(
                        client,
                        collection,
                        local,
                        int(previous["visible"]),
                        number,
                        write,
                        retire,
                        tenant,
                        bm25["stem"],
                        known=live_entities(root, previous, born, retire, tenant, bm25["stem"]),
                    )
                    born = None if born is None else next_born(born, write, len(local), number)
                copy_generation = previous.get("copy_generation")
                if born is None:  # a pointer from before the born record: read it from the collection, once
                    copy_generation, born = milvus_born.born_from_collection(client, collection, number)
                retired_ids: list[Any] = counts.pop("retired_ids", [])
                bm25["applied"] = previous["bm25"].get("applied", True)
                mode = "incremental"
            else:
                collection = f"{name}_{re.sub(r'[^0-9A-Za-z_]', '_', gen)}_{secrets.token_hex(3)}"
                write_intent(root, {"mode": "full", "collection": collection})
                retired_ids, pending, expire_now, born, copy_generation = [], [], [], {}, number
                create_collection(client, collection, dim, index_type, k1=bm25["k1"], b=bm25["b"])
                bm25["applied"] = bm25_params_applied(client, collection, bm25)
                _copy(client, collection, local, tenant, bm25["stem"], number)
                client.flush(collection)  # seal the segments: indexes are built now, not searched brute force
                client.load_collection(collection)
                _point_alias(client, name, collection)
                counts, recovery, mode = {"rows_written": len(local), "rows_retired": 0}, {}, "full"
        except Exception as exc:
            release_client(client, resolve_uri(root, stored))
            if isinstance(exc, (UsageError, IndexMissingError)):
                raise
            raise IndexMissingError(f"publishing to Milvus at {stored} failed: {type(exc).__name__}: {str(exc)[:300]}") from None
        sparse_file = write_sparse(root, gen, local.sparse_rows)
        meta_file = write_row_metadata(root, gen, local.store.row_metadata())  # filters resolved without Milvus
        retired_file = write_sparse(root, f"retired-{gen}", retired_ids)  # deleted by id at the next publish
        born_file = write_born(root, gen, born) if born is not None else None
        pointer = {
            "uri": stored,
            "name": name,
            "collection": collection,
            "generation": gen,
            "visible": number,
            "sparse_file": sparse_file,
            "meta_file": meta_file,
            "retired_file": retired_file,
            "pending_expiry": pending,
            "pending_drop": pending_drop,
            "born_file": born_file,
            **({"copy_generation": copy_generation} if born is not None else {}),
            "layout": LAYOUT,
            "tenant": tenant,
            "alias": name,
            "rows": len(local),
            "dimension": dim,
            "index_type": index_type,
            "bm25_input": BM25_INPUT,
            "bm25": bm25,
            "token_env": "RAGSIEVE_MILVUS_TOKEN" if token else None,
            "last_publish": {"mode": mode, **counts, **recovery},
        }
        write_pointer(root, pointer)  # the switch: readers now show the new generation
        (root / INTENT).unlink(missing_ok=True)
        keep = {
            Path(str(f)).name
            for f in (sparse_file, meta_file, retired_file, born_file, previous.get("sparse_file"), previous.get("meta_file"))
        } | {Path(e["file"]).name for e in pending}
        for stale in [
            *(root / SPARSE_DIR).glob("*.npy"),
            *(root / SPARSE_DIR).glob("*.npz"),
        ]:  # the previous generation's subset stays for its readers
            if stale.name not in keep:
                stale.unlink(missing_ok=True)
        old = previous.get("collection")
        try:
            if mode == "full" and old and old != collection and previous.get("uri") == stored and client.has_collection(old):
                if any(c == old for c, _ in leases.held(root)):  # a reader still shows it: dropped later
                    pointer["pending_drop"] = pending_drop + [old]
                    write_pointer(root, pointer)
                else:
                    client.drop_collection(old)
            leases.sweep(root, collection, number, leases.held(root))
        finally:
            release_client(client, resolve_uri(root, stored))
    return pointer


def _pending_expiry(previous: dict) -> list[dict]:
    """Retired-row files not yet deleted: those kept for readers, and the one the last publish wrote (rows dead
    from its generation on)."""
    out = list(previous.get("pending_expiry") or [])
    if previous.get("retired_file") and "visible" in previous:
        out.append({"died": int(previous["visible"]), "file": previous["retired_file"]})
    return out


def _expired_ids(root: Path, now: list[dict], kept: list[dict]) -> list[int] | None:
    """Primary keys to delete now; None when a file is unreadable and nothing is kept for readers (then the
    caller deletes by filter)."""
    ids: list[int] = []
    for entry in now:
        part = _read_ids(root, entry["file"])
        if part is None:
            return None if not kept else ids
        ids.extend(part)
    return ids


def _drop_unread(client: Client, pending: list[str], held: list[tuple[str, int]]) -> list[str]:
    """Drop the collections a full publish replaced once no reader holds them; those still read."""
    read = {c for c, _ in held}
    left = []
    for old in pending:
        if old in read:
            left.append(old)
        elif client.has_collection(old):
            client.drop_collection(old)
    return left


def _drop_abandoned(client: Client, root: Path, live: str | None) -> dict:
    """The intent a killed publish left ({} when none); the collection a killed full copy was filling is
    dropped unless it is live."""
    try:
        intent = json.loads((root / INTENT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    abandoned = intent.get("collection") if intent.get("mode", "full") == "full" else None
    if abandoned and abandoned != live and client.has_collection(abandoned):
        log.warning("dropping Milvus collection %s left by an interrupted publish", abandoned)
        client.drop_collection(abandoned)
    return intent


def _read_ids(root: Path, name: str | None) -> list[int] | None:
    if not name:
        return None
    try:
        return npy.load(root / name).astype(int).tolist()
    except (OSError, ValueError):
        return None


def _point_alias(client: Client, alias: str, collection: str) -> None:
    """Milvus' own atomic switch: the alias `<name>` now names the new collection (for clients that query
    Milvus directly; ragsieve's readers open the concrete collection named in the pointer file, so a reader
    keeps one consistent generation until it reopens)."""
    try:
        if alias not in (client.list_aliases().get("aliases") or []):  # (describe_alias logs an error when absent)
            client.create_alias(collection, alias)
        elif alias not in (client.list_aliases(collection).get("aliases") or []):
            client.alter_alias(collection, alias)
    except Exception as exc:  # an engine without aliases: the pointer file alone switches
        log.warning(
            "Milvus alias %s not set (%s: %s); readers still switch by %s", alias, type(exc).__name__, str(exc)[:120], POINTER
        )


def _copy(client: Client, collection: str, local: Local, tenant: str, stem: bool, generation: int) -> None:
    n = len(local)
    for start in range(0, n, BATCH):
        client.insert(collection, entities(local, list(range(start, min(n, start + BATCH))), tenant, stem, generation))
