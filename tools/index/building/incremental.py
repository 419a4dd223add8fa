"""Writing incremental (format 2) generations: a shared chunk store and segments, O(k) work for k changed chunks.

Layout of an index folder in this format::

    CURRENT                    the live generation, e.g. gen-9
    store-<b>.sqlite (+ -wal)  the chunk store shared by generations since gen-<b>: each chunk and document
                               record carries `born` (the generation that added it) and `retired` (the one that
                               removed it, 0 = live); generation G reads born <= G and (retired = 0 or > G)
    gen-9/manifest.json        rows, segments, store, stats; gen-9/segments/seg-*/ (hard links, `segments`)
    gen-9/sparse.json          percentile and cut-off (rows = nearest-neighbour similarity below it)
    gen-9/changes.json         rows changed from the previous generation (the Milvus publisher's delta)

Visibility: a build adds its records with born = G and retires the old ones with retired = G in one SQLite
transaction, writes `gen-G/`, fsyncs it, and only then switches CURRENT; readers of an older generation keep
seeing their own records (born <= G' < G; retired G > G'). A build killed after its commit but before the
switch left records no generation names: the next build removes them first (`ChunkStore.forget_after`).
Records retired at or before the oldest generation still on disk are deleted after each switch (`collect`).

Compaction: a change appends one delta segment; when there are more than MAX_SEGMENTS, or the deltas cover
more than a quarter of the rows, or the rows outgrow the base's spare capacity, the generation is written with
one new base segment instead (O(N), no O(N^2): the nearest-neighbour entries are carried, not recomputed).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.context import BuildContext
from ragsieve.tools.index.building.embed_cache import EmbeddingCache, embed_resumable
from ragsieve.tools.index.building.layout import Layout, plan_rows
from ragsieve.tools.index.building.progress import progress_reporter
from ragsieve.tools.index.building.report import indexed_text
from ragsieve.tools.index.building.windows import code_headers
from ragsieve.tools.index.local.segments import SEGMENTS, SegmentView, link_segments, postings_of, write_segment
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.index.search import npy
from ragsieve.tools.index.search.bm25 import tokenize
from ragsieve.tools.index.sparse import subset as sparse_filter
from ragsieve.tools.index.sparse.ann import ivf_partition
from ragsieve.tools.index.sparse.cells import carry_cells, cells_for, nearest_update_cells
from ragsieve.tools.index.sparse.nearest import nearest_update
from ragsieve.tools.index.sparse.subset import nearest_neighbours, sparse_subset
from ragsieve.tools.types import Chunk, Document

Chunked = list[tuple[Document, list[Chunk]]]  # each new document with its chunks

LAYOUT = "segments"
MAX_SEGMENTS = 16
DELTA_SHARE = 0.25  # deltas covering more of the rows than this: compact into a new base


def generation_number(gen: Path) -> int:
    return int(gen.name.split("-")[1])


def capacity(n: int) -> int:
    """Rows of a base's vectors: spare rows so that additions do not force a new base each time."""
    return n + max(1024, n // 8)


def store_generation(ctx: BuildContext, gen: Path, temp_store: Path) -> dict:
    """Move a freshly written per-generation chunk store into a new shared store `store-<G>.sqlite`."""
    g = generation_number(gen)
    name = f"store-{g}.sqlite"
    path = gen.parent / name
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)  # left by a build of the same number killed before its switch
    shared = ChunkStore(path, generation=g)
    try:
        db = shared._db
        db.execute("ATTACH DATABASE ? AS tmp", (str(temp_store),))
        cols = "doc_id, chunk_index, row, text, text_hash, source, title, kind, line_start, line_end, symbol"
        db.execute(f"INSERT INTO main.chunks ({cols}, born) SELECT {cols}, ? FROM tmp.chunks", (g,))
        dcols = "doc_id, source, content_hash, n_chunks, first_row"
        db.execute(f"INSERT INTO main.documents ({dcols}, born) SELECT {dcols}, ? FROM tmp.documents", (g,))
        db.commit()
        db.execute("DETACH DATABASE tmp")
    finally:
        shared.close()
    temp_store.unlink()
    return {"file": name, "generation": g}


def write_base(
    ctx: BuildContext,
    gen: Path,
    tokens: list[list[str]],
    vectors: np.ndarray,
    nn: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict:
    """The single base segment of a full generation (first build, --rebuild, migration), from every row's
    BM25 tokens and vector."""
    n = len(vectors)
    vocab, indptr, docs, tf, dl = postings_of(tokens)
    centroids = cell = None
    if nn is None and n > sparse_filter.APPROXIMATE_ABOVE:  # IVF: its cells are kept for later changes
        sim, row, centroids, cell = ivf_partition(vectors)
    else:
        sim, row = nearest_neighbours(vectors) if nn is None else nn
    padded = np.zeros((capacity(n), vectors.shape[1]), dtype=np.float32)
    padded[:n] = vectors
    name = f"seg-{generation_number(gen)}"
    written = write_segment(
        gen / SEGMENTS / name, np.arange(n), padded, dl, (vocab, indptr, docs, tf), np.arange(n), sim, row, cell, centroids
    )
    return {"segments": [name], "total_len": int(dl.sum()), "bytes_written": written}


def write_incremental(
    ctx: BuildContext,
    gen: Path,
    prev_gen: Path,
    prev: dict,
    prev_store: ChunkStore,
    chunked: Chunked,
    keep: set[str],
    prev_docs: dict[str, str] | None = None,
    dropped: list[str] | None = None,
) -> dict:
    """A generation that appends one delta segment to `prev_gen`'s (or compacts). Returns its parts:
    layout, vectors view, sparse, store record, segments, bytes written, embedding counts. `dropped`: the
    previous documents that go (changed or removed), when known; else those of `prev_docs` not in `keep`."""
    g, g_prev = generation_number(gen), generation_number(prev_gen)
    n_base = int(prev["counts"]["chunks"])
    if dropped is None:
        prev_docs = prev_store.documents() if prev_docs is None else prev_docs
        dropped = [d for d in prev_docs if d not in keep]
    freed = [r for d in dropped for r in prev_store.doc_rows(d)]
    old_texts = [c.text for c in prev_store.get_many(freed)] if freed else []
    layout = plan_rows(n_base, freed, [(d.doc_id, len(chunks)) for d, chunks in chunked])
    store_path = gen.parent / prev["store"]["file"]
    store = ChunkStore(store_path, generation=g)
    rows_written = 0
    try:
        rows_written += store.forget_after(g_prev)
        store.drop_documents(dropped)
        store.move_rows(layout.moved)
        for d, chunks in chunked:
            store.add_document(d.doc_id, d.source, d.content_hash, chunks, layout.new_rows[d.doc_id])
        changed = layout.changed
        chunks_changed = store.get_many(changed)
        store.commit()
        rows_written += len(freed) + 2 * len(layout.moved) + len(changed)
    finally:
        store.close()
    texts = {
        r: (indexed_text(c, ctx.symbol_headers, ctx.header_words) if ctx.index_titles else c.text)
        for r, c in zip(changed, chunks_changed)
    }
    new_rows = sorted(r for rows in layout.new_rows.values() for r in rows)
    view = SegmentView(prev_gen, prev["segments"], n_base)
    dim = view.vectors.shape[1]
    headers = dict(zip(changed, code_headers(chunks_changed, [texts[r] for r in changed])))
    fresh, cached = _embed(ctx, [texts[r] for r in new_rows], dim, [headers[r] for r in new_rows])
    base_vectors = npy.load(prev_gen / SEGMENTS / prev["segments"][0] / "vectors.npy", mmap_mode="c")
    n = layout.n
    if n <= len(base_vectors):
        vectors = base_vectors[:n]
        for seg in view.segments[1:]:
            rows = np.asarray(seg.rows)
            keep_rows = rows < n
            vectors[rows[keep_rows]] = np.asarray(seg.vectors)[keep_rows]
    else:  # outgrew the base: this generation compacts (below)
        vectors = np.zeros((n, dim), dtype=np.float32)
        vectors[: min(n, n_base)] = view.vectors[: min(n, n_base)]
    if layout.moved:
        old, new = zip(*sorted(layout.moved.items()))
        vectors[list(new)] = np.asarray(view.vectors[list(old)])
    if new_rows:
        vectors[new_rows] = fresh
    old_sim, old_row = view.nearest()
    cells, upgraded = view.cells(), False
    if cells is None and n > sparse_filter.APPROXIMATE_ABOVE:  # written before cells were kept: once, then compact
        cells, upgraded = cells_for(view.vectors), True
    cell = None if cells is None else carry_cells(cells[1], n, n_base, layout.moved, new_rows, vectors, cells[0])
    if cells is not None and cell is not None and n > sparse_filter.APPROXIMATE_ABOVE:
        sim, row, touched = nearest_update_cells(vectors, old_sim, old_row, n_base, freed, layout.moved, new_rows, cells[0], cell)
    else:  # exact against all rows
        sim, row, touched = nearest_update(vectors, old_sim, old_row, n_base, freed, layout.moved, new_rows)
    kinds = {r: c.kind for r, c in zip(changed, chunks_changed)}  # compound words: code chunks only
    tokens = [
        tokenize(texts[r], ctx.bm25_proto.stem, ctx.bm25_proto.identifiers, ctx.bm25_proto.compounds and kinds[r] == "code")
        for r in changed
    ]
    vocab, indptr, docs, tf, dl = postings_of(tokens)
    name = f"seg-{g}"
    link_segments(prev_gen, gen, prev["segments"])
    written = write_segment(
        gen / SEGMENTS / name,
        changed,
        vectors[changed] if changed else np.zeros((0, dim)),
        dl,
        (vocab, indptr, docs, tf),
        touched,
        sim[touched],
        row[touched],
        None if cell is None else cell[changed],
    )
    segments = list(prev["segments"]) + [name]
    total_len = int(prev["bm25_total_len"]) + int(dl.sum()) - view.dl_of(freed + list(layout.moved))
    delta_rows = sum(int((np.asarray(s.rows) < n).sum()) for s in view.segments[1:]) + len(changed)
    compacted = len(segments) > MAX_SEGMENTS or delta_rows > DELTA_SHARE * n or n > len(base_vectors) or upgraded
    if compacted:
        whole = SegmentView(gen, segments, n)
        (vocab, indptr, docs, tf), _, dl_all = whole.merged_postings()
        padded = np.zeros((capacity(n), dim), dtype=np.float32)
        padded[:n] = vectors
        shutil.rmtree(gen / SEGMENTS)
        name = f"seg-{g}"
        written = write_segment(
            gen / SEGMENTS / name,
            np.arange(n),
            padded,
            dl_all,
            (vocab, indptr, docs, tf),
            np.arange(n),
            sim,
            row,
            cell,
            None if cells is None else cells[0],
        )
        segments, total_len = [name], int(dl_all.sum())
    return {
        "layout": layout,
        "vectors": vectors,
        "segments": segments,
        "total_len": total_len,
        "store": prev["store"],
        "bytes_written": written,
        "store_rows_written": rows_written,
        "compacted": compacted,
        "cells_added": upgraded,
        "embedded": len(new_rows),
        "from_cache": cached,
        "sparse": sparse_subset(sim, ctx.sparse_percentile),
        "keys_gone": old_texts,
        "keys_new": [texts[r] for r in new_rows],
    }


def _embed(ctx: BuildContext, texts: list[str], dim: int, headers: list[int | None]) -> tuple[np.ndarray, int]:
    """Vectors of `texts` (the added chunks only), resumable through the index's embedding checkpoint."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out, 0
    if ctx.embedder_for().dimension != dim:
        raise UsageError(
            f"index {ctx.root} holds {dim}-d vectors; {ctx.model!r} gives "
            f"{ctx.embedder_for().dimension}-d vectors (re-embed everything with --rebuild)"
        )
    cache = EmbeddingCache(ctx.root / "embeddings.sqlite", ctx.cache_model(), dim)
    try:
        rows = list(range(len(texts)))
        embed, local = ctx.document_embed(texts, headers)  # long code chunks: mean of windows (windows.py)
        if ctx.ray is not None:
            ctx.ray.for_model(ctx.model, ctx.encoder, ctx.batch_size).fill(cache, texts, [r for r in rows if r not in local])
        cached = embed_resumable(cache, texts, rows, out, embed, ctx.step(), lambda total: progress_reporter(ctx.progress, total))
    finally:
        cache.close()
    ctx.resumed_embeddings = cached - ctx.streamed  # embedded while chunking: not resumed
    return out, cached


def sparse_record(percentile: float, cutoff: float) -> str:
    return json.dumps({"percentile": percentile, "cutoff": cutoff, "rows_from": "nearest-neighbour similarity"})


def collect_stores(root: Path) -> dict:
    """After a switch: delete shared stores no generation on disk names, and in the others the records no
    generation on disk still sees. Returns what was deleted."""
    users: dict[str, list[int]] = {}
    for gen in root.iterdir():
        if re.match(r"^gen-\d+$", gen.name) and (gen / "manifest.json").is_file():
            try:
                store = json.loads((gen / "manifest.json").read_text(encoding="utf-8")).get("store")
            except (OSError, ValueError):
                continue
            if isinstance(store, dict) and store.get("file"):
                users.setdefault(store["file"], []).append(generation_number(gen))
    deleted: list[str] = []
    records = 0
    for path in root.glob("store-*.sqlite"):
        if path.name not in users:
            for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                f.unlink(missing_ok=True)
            deleted.append(path.name)
            continue
        store = ChunkStore(path, generation=max(users[path.name]))
        try:
            records += store.collect(min(users[path.name]))
        finally:
            store.close()
    return {"stores_deleted": deleted, "records_deleted": records}


def copied_store(gen: Path, prev_store: ChunkStore, prev_gen: Path, chunked: Chunked, keep: set[str]) -> Layout:
    """Copy the previous chunk store and edit it: drop the documents not kept, move tail rows into the holes,
    add the new documents in the rows `plan_rows` gives them."""
    prev_docs = prev_store.documents()
    dropped = [d for d in prev_docs if d not in keep]
    freed = [r for d in dropped for r in prev_store.doc_rows(d)]
    layout = plan_rows(prev_store.count(), freed, [(d.doc_id, len(chunks)) for d, chunks in chunked])
    if (prev_gen / "chunks.sqlite").is_file():
        shutil.copyfile(prev_gen / "chunks.sqlite", gen / "chunks.sqlite")
    else:  # the previous generation reads a shared store: its visible records become this file
        _export_visible(prev_store, gen / "chunks.sqlite")
    store = ChunkStore(gen / "chunks.sqlite")
    try:
        store.drop_documents(dropped)
        store.move_rows(layout.moved)
        for d, chunks in chunked:
            store.add_document(d.doc_id, d.source, d.content_hash, chunks, layout.new_rows[d.doc_id])
        store.commit()
        if store.count() != layout.n:
            raise RuntimeError(f"chunk store holds {store.count()} rows, layout says {layout.n}")
    finally:
        store.close()
    return layout


def _export_visible(prev_store: ChunkStore, path: Path) -> None:
    ChunkStore(path).close()  # the per-generation schema
    db = prev_store._db
    cols = "doc_id, chunk_index, row, text, text_hash, source, title, kind, line_start, line_end, symbol"
    dcols = "doc_id, source, content_hash, n_chunks, first_row"
    out = __import__("sqlite3").connect(path)
    try:
        out.executemany(
            f"INSERT INTO chunks ({cols}) VALUES ({','.join('?' * 11)})",
            db.execute(f"SELECT {cols} FROM chunks WHERE 1{prev_store._vis}"),
        )
        out.executemany(
            f"INSERT INTO documents ({dcols}) VALUES (?, ?, ?, ?, ?)",
            db.execute(f"SELECT {dcols} FROM documents WHERE 1{prev_store._vis}"),
        )
        out.commit()
    finally:
        out.close()
