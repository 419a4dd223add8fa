"""The Milvus entity of a chunk row, and the visibility rule readers apply.

Visibility rule (stable rows): an entity carries its `row` (the row number in the
generations that show it), `born` (the generation that wrote it) and `died` (the
first generation that no longer shows it; `ALIVE` while current). The pointer
file `<index>/milvus.json` names the published generation G (`visible`), and
every read filters `born <= G and died > G`. A publish writes its new rows with
`born = G+1` and marks the rows it replaces `died = G+1` (an upsert of the same
primary key), flushes, and only then rewrites the pointer: a reader sees the
whole of G or the whole of G+1, never part of a change. Rows dead before the
previous generation are deleted at the next publish; a killed publish's rows
(`born > G`, or `died` set but not yet reached) are undone first.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ragsieve.tools.index.building.report import indexed_text
from ragsieve.tools.index.local.store import text_hash
from ragsieve.tools.index.milvus.schema import analysed

if TYPE_CHECKING:
    from ragsieve.tools.index.backend import ChunkSource
    from ragsieve.tools.index.milvus.local import Local

ALIVE = 2**62  # `died` of an entity still current
ROW_BITS = 36  # primary key = generation << 36 | row: 68 billion rows per generation
LAYOUT = "stable-rows-1"  # pointer marker: collections with born/died/pk (older ones have none)


def generation_number(gen_name: str) -> int:
    m = re.fullmatch(r"gen-(\d+)", gen_name)
    if not m:
        raise ValueError(f"not a generation folder name: {gen_name!r}")
    return int(m.group(1))


def visible_at(generation: int) -> str:
    """The filter that shows exactly generation `generation`."""
    return f"(born <= {int(generation)} and died > {int(generation)})"


def pointer_filter(pointer: dict) -> str | None:
    """The visibility filter of a pointer, or None for a collection published before stable rows."""
    if pointer.get("layout") != LAYOUT:
        return None
    return visible_at(int(pointer["visible"]))


def primary_key(generation: int, row: int) -> int:
    return (int(generation) << ROW_BITS) | int(row)


def entities(local: Local, rows: list[int], tenant: str, stem: bool, generation: int) -> list[dict]:
    """The entities of `rows` of the local generation `local` (a HybridIndex), born in `generation`."""
    chunks = local.store.get_many(rows)
    hashes = doc_hashes(local.store, {c.doc_id for c in chunks})
    headers = local.manifest.get("settings", {}).get("chunking", {}).get("symbol_headers", True)
    titles = local.manifest.get("index_titles", True)  # the local BM25 indexed exactly this text
    identifiers = bool((local.manifest.get("bm25") or {}).get("identifiers", False))  # and with these terms
    compounds = bool((local.manifest.get("bm25") or {}).get("compounds", False))
    words = bool(local.manifest.get("settings", {}).get("chunking", {}).get("header_words", False))
    vectors = np.asarray(local.vectors[rows], dtype=np.float32).reshape(len(rows), -1)
    return [
        {
            "pk": primary_key(generation, r),
            "row": r,
            "born": int(generation),
            "died": ALIVE,
            "doc_id": c.doc_id,
            "chunk_index": c.chunk_index,
            "text": c.text[:65000],
            "search_text": analysed(
                indexed_text(c, headers, words) if titles else c.text, stem, identifiers, compounds and c.kind == "code"
            )[:65000],
            "source": c.source[:4000],
            "title": c.title[:1000],
            "kind": c.kind,
            "symbol": c.symbol[:1000],
            "line_start": -1 if c.line_start is None else c.line_start,
            "line_end": -1 if c.line_end is None else c.line_end,
            "text_hash": text_hash(c.text),
            "doc_hash": hashes.get(c.doc_id, ""),
            "tenant": tenant,
            "dense": v.tolist(),
        }
        for r, c, v in zip(rows, chunks, vectors)
    ]


def doc_hashes(store: ChunkSource, doc_ids: set[str]) -> dict[str, str]:
    """doc_id -> content hash for `doc_ids` only: reading every document's (`store.documents()`) per batch made
    a one-row publish O(corpus) and a full copy quadratic."""
    db = getattr(store, "_db", None)
    if db is None:
        every = store.documents()
        return {d: every.get(d, "") for d in doc_ids}
    ids, out = sorted(doc_ids), {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        out.update(db.execute(f"SELECT doc_id, content_hash FROM documents WHERE doc_id IN ({marks})", part))
    return out
