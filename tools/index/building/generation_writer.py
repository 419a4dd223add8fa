"""Writing one generation folder: chunk store, vectors, BM25, FAISS, sparse subset, manifest, change list.

The rows follow `ragsieve.tools.index.building.layout`: unchanged documents keep their
rows, so the change list (`changes.json`: the base generation, its row count and
the rows whose chunk or vector differs from it) names O(k) rows for k changed
documents (the sparse subset is recomputed whole: a list of rows, not row
content). A publisher that holds the base generation applies just those rows
(`ragsieve.tools.index.milvus.delta`); without a base (first build, `--rebuild`,
changed chunking settings) there is no change list and publishers copy it all.
Only added or changed documents are chunked and embedded; the chunk store of
an incremental generation is the previous file copied and edited in place.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from ragsieve.tools import tracing
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.change_plan import FINGERPRINT_KIND, ChangePlan, fingerprint_of
from ragsieve.tools.index.building.context import BuildContext
from ragsieve.tools.index.building.embed_cache import text_key
from ragsieve.tools.index.building.embedding import chunk_while_embedding, embed_vectors, streams
from ragsieve.tools.index.building.incremental import (
    LAYOUT,
    Chunked,
    copied_store,
    sparse_record,
    store_generation,
    write_base,
    write_incremental,
)
from ragsieve.tools.index.building.layout import plan_rows
from ragsieve.tools.index.building.report import indexed_text, package_version
from ragsieve.tools.index.building.windows import code_headers
from ragsieve.tools.index.local.generations import MANIFEST, fsync_tree, read_manifest
from ragsieve.tools.index.local.segments import SegmentView
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.index.search import npy
from ragsieve.tools.index.search.bm25 import BM25Index, tokenize
from ragsieve.tools.index.sparse.subset import find_sparse_rows, sparse_subset
from ragsieve.tools.modes import BM25Engine, FaissKind
from ragsieve.tools.types import Document

FORMAT_VERSION = 1
SEGMENTS_FORMAT = 2  # the incremental layout (`ragsieve.tools.index.building.incremental`)
CHANGES = "changes.json"


def read_changes(gen: Path) -> dict | None:
    """The change list of generation folder `gen`, or None (a full generation)."""
    try:
        return json.loads((gen / CHANGES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def segments_wanted(ctx: BuildContext) -> bool:
    """New generations use the incremental layout (`ragsieve.tools.index.building.incremental`) with a flat dense index
    and the bm25s engine (the defaults); HNSW and rank_bm25 keep whole-generation files."""
    return ctx.segments and ctx.dense_proto.kind is FaissKind.FLAT and ctx.bm25_proto.engine is BM25Engine.BM25S


def incremental_applies(ctx: BuildContext, prev: dict | None, settings: dict) -> bool:
    """True when the next generation appends a delta to `prev` (`ragsieve.tools.index.building.incremental`) and its
    corpus fingerprint can be updated in place: then a build need not list the previous documents."""
    return (
        prev is not None
        and segments_wanted(ctx)
        and prev.get("layout") == LAYOUT
        and prev.get("corpus_fingerprint_kind") == FINGERPRINT_KIND
        and {k: prev["settings"]["bm25"].get(k) for k in ("stem", "identifiers")}
        == {k: settings["bm25"].get(k) for k in ("stem", "identifiers")}
    )


@tracing.traced("ragsieve.build.write")  # a build phase's span (docs/tracing.md)
def write_generation(
    ctx: BuildContext,
    gen: Path,
    docs: list[Document],
    unchanged: set[str],
    prev_store: ChunkStore | None,
    prev_gen: Path | None,
    settings: dict,
    hashes: dict[str, str],
    kept: Sequence[str] = (),
    prev_docs: dict[str, str] | None = None,
    plan: ChangePlan | None = None,
) -> dict:
    """Write generation `gen` of `ctx`'s index; returns its manifest (`prev_docs`: the previous
    generation's documents, when the caller has listed them already; `plan`: the change found without listing
    them, `ragsieve.tools.index.building.change_plan`, then `hashes` and `kept` are not used)."""
    fresh = [d for d in docs if d.doc_id not in unchanged]
    cut_before = getattr(ctx.embedder, "inputs_cut", 0)  # a provider reused across builds counts on
    ray = ctx.ray  # --ray: chunks cut on the cluster (`ray_load`)
    t_stream = time.perf_counter()
    ctx.streamed, ctx.bm25_tokens = 0, {}
    if ctx.overlap and ray is None and len(fresh) >= ctx.stream_min_docs and streams(ctx):
        chunked = chunk_while_embedding(ctx, fresh, segments_wanted(ctx))  # the encoder busy while documents are cut
    else:
        chunked = [(d, ray.chunks_of(d, ctx.chunker) if ray is not None else ctx.chunker.run(d)) for d in fresh]
    ctx.stream_seconds = time.perf_counter() - t_stream if ctx.streamed else 0.0
    segmented = segments_wanted(ctx)
    prev = read_manifest(prev_gen) if prev_store is not None and prev_gen is not None else None
    if (
        segmented
        and prev is not None
        and prev_store is not None
        and prev_gen is not None
        and prev.get("layout") == LAYOUT
        and {k: prev["settings"]["bm25"].get(k) for k in ("stem", "identifiers", "compounds")}
        == {k: settings["bm25"].get(k) for k in ("stem", "identifiers", "compounds")}
    ):
        ctx.bm25_tokens = {}  # the incremental writer tokenizes the delta itself
        return _write_incremental(
            ctx,
            gen,
            docs,
            prev_store,
            prev_gen,
            prev,
            settings,
            hashes,
            kept,
            chunked,
            set(unchanged) | set(kept),
            cut_before,
            prev_docs,
            plan,
        )
    if prev_store is not None and prev_gen is not None:
        layout = copied_store(gen, prev_store, prev_gen, chunked, set(unchanged) | set(kept))
    else:
        layout = plan_rows(0, [], [(d.doc_id, len(chunks)) for d, chunks in chunked])
        store = ChunkStore(gen / "chunks.sqlite")
        try:
            for d, chunks in chunked:
                store.add_document(d.doc_id, d.source, d.content_hash, chunks, layout.new_rows[d.doc_id])
            store.commit()
        finally:
            store.close()
    n = layout.n
    if n == 0:
        raise UsageError("the documents produced no chunks to index")
    store = ChunkStore(gen / "chunks.sqlite", read_only=True)
    try:
        chunks_in_rows = store.get_many(range(n))
    finally:
        store.close()
    texts = [indexed_text(c, ctx.symbol_headers, ctx.header_words) if ctx.index_titles else c.text for c in chunks_in_rows]
    ctx.last_keys = {text_key(t) for t in texts}
    to_embed = sorted(r for rows in layout.new_rows.values() for r in rows)
    prev_vectors = None
    if prev_store is not None and prev_gen is not None and prev is not None:
        prev_vectors = (
            SegmentView(prev_gen, prev["segments"], prev["counts"]["chunks"]).vectors
            if prev.get("layout") == LAYOUT
            else npy.load(prev_gen / "vectors.npy", mmap_mode="r")
        )
    t0 = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix="ragsieve-bm25") as pool:
        # BM25 tokenising and indexing is Python work; the encoder spends its time in native code that
        # releases the GIL, so the two overlap (benchmarks/scale.py `build`: with and without)
        work = _tokens if segmented else _build_bm25
        kinds = [c.kind for c in chunks_in_rows]  # compound words: code chunks only (`BM25Index.build`)
        bm25_job = pool.submit(work, ctx, texts, gen, kinds) if ctx.overlap else None
        vectors = embed_vectors(ctx, layout, texts, to_embed, prev_vectors, code_headers(chunks_in_rows, texts))
        embed_seconds = round(time.perf_counter() - t0 + ctx.stream_seconds, 3)
        tokens = work(ctx, texts, gen, kinds) if bm25_job is None else bm25_job.result()
    extra: dict = {}
    if segmented:  # a full generation of the incremental layout: a new shared store and one base segment
        extra = {"layout": LAYOUT, "store": store_generation(ctx, gen, gen / "chunks.sqlite")}
        assert tokens is not None  # `_tokens` returns them
        base = write_base(ctx, gen, tokens, vectors)
        extra |= {"segments": base["segments"], "bm25_total_len": base["total_len"]}
        sim = SegmentView(gen, base["segments"], n).nearest()[0]
        sparse = sparse_subset(sim, ctx.sparse_percentile)
        (gen / "sparse.json").write_text(sparse_record(ctx.sparse_percentile, sparse.cutoff), encoding="utf-8")
        extra["io"] = {"segment_bytes": base["bytes_written"], "store_rows_written": n, "compacted": True}
    else:
        ctx.dense_proto.build(vectors).save(gen)
        sparse = find_sparse_rows(vectors, ctx.sparse_percentile)
        (gen / "sparse.json").write_text(sparse.model_dump_json(), encoding="utf-8")
    if prev_store is not None and prev_gen is not None:
        (gen / CHANGES).write_text(
            json.dumps({"base": prev_gen.name, "base_rows": layout.n_base, "rows": n, "changed": layout.changed}),
            encoding="utf-8",
        )
    counts = {
        "documents": len(docs) + len(kept),
        "chunks": n,
        "embedded_this_run": len(to_embed),
        "embed_seconds": embed_seconds,
        "rows_changed": len(layout.changed),
        "inputs_cut": getattr(ctx.embedder, "inputs_cut", 0) - cut_before,
    }
    return _finish(
        ctx,
        gen,
        prev_gen,
        settings,
        fingerprint_of(hashes),
        int(vectors.shape[1]),
        counts,
        {"rows": len(sparse.rows), "percentile": sparse.percentile, "cutoff": sparse.cutoff},
        extra,
    )


def _write_incremental(
    ctx: BuildContext,
    gen: Path,
    docs: list[Document],
    prev_store: ChunkStore,
    prev_gen: Path,
    prev: dict,
    settings: dict,
    hashes: dict[str, str],
    kept: Sequence[str],
    chunked: Chunked,
    keep: set[str],
    cut_before: int,
    prev_docs: dict[str, str] | None = None,
    plan: ChangePlan | None = None,
) -> dict:
    t0 = time.perf_counter()
    part = write_incremental(
        ctx, gen, prev_gen, prev, prev_store, chunked, keep, prev_docs, dropped=plan.dropped if plan is not None else None
    )
    layout = part["layout"]
    if layout.n == 0:
        raise UsageError("the documents produced no chunks to index")
    sparse = part["sparse"]
    (gen / "sparse.json").write_text(sparse_record(sparse.percentile, sparse.cutoff), encoding="utf-8")
    (gen / CHANGES).write_text(
        json.dumps({"base": prev_gen.name, "base_rows": layout.n_base, "rows": layout.n, "changed": layout.changed}),
        encoding="utf-8",
    )
    ctx.last_keys = None
    ctx.gone_keys = {text_key(t) for t in part["keys_gone"]} - {text_key(t) for t in part["keys_new"]}
    counts = {
        "documents": plan.documents if plan is not None else len(docs) + len(kept),
        "chunks": layout.n,
        "embedded_this_run": part["embedded"],
        "embed_seconds": round(time.perf_counter() - t0 + ctx.stream_seconds, 3),
        "rows_changed": len(layout.changed),
        "inputs_cut": getattr(ctx.embedder, "inputs_cut", 0) - cut_before,
    }
    extra = {
        "layout": LAYOUT,
        "store": part["store"],
        "segments": part["segments"],
        "bm25_total_len": part["total_len"],
        "io": {
            "segment_bytes": part["bytes_written"],
            "store_rows_written": part["store_rows_written"],
            "compacted": part["compacted"],
            **({"ivf_cells_added": True} if part["cells_added"] else {}),
        },
    }
    fingerprint = plan.fingerprint(prev["corpus_fingerprint"]) if plan is not None else fingerprint_of(hashes)
    return _finish(
        ctx,
        gen,
        prev_gen,
        settings,
        fingerprint,
        int(part["vectors"].shape[1]),
        counts,
        {"rows": len(sparse.rows), "percentile": sparse.percentile, "cutoff": sparse.cutoff},
        extra,
    )


def _finish(
    ctx: BuildContext,
    gen: Path,
    prev_gen: Path | None,
    settings: dict,
    fingerprint: str,
    dim: int,
    counts: dict,
    sparse: dict,
    extra: dict,
) -> dict:
    root = ctx.recorded_root(prev_gen)
    manifest = {
        "format_version": FORMAT_VERSION if not extra else SEGMENTS_FORMAT,
        "ragsieve_version": package_version("ragsieve"),
        "generation": gen.name,
        "embedding": ctx.embedding_section(dim, prev_gen),
        "faiss": settings["faiss"],
        "bm25": settings["bm25"],
        "tokenizer": settings["bm25"]["tokenizer"],
        "chunk_tokens": ctx.chunker.chunk_tokens,
        "index_titles": ctx.index_titles,
        "settings": settings,
        "counts": counts,
        "sparse": sparse,
        "corpus_fingerprint": fingerprint,
        "corpus_fingerprint_kind": FINGERPRINT_KIND,
        "source_root": str(root) if root else None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": {d: package_version(d) for d in ("faiss-cpu", "bm25s", "rank-bm25", "sentence-transformers")},
        **extra,
    }
    (gen / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    fsync_tree(gen)
    return manifest


def _tokens(ctx: BuildContext, texts: list[str], gen: Path, kinds: list[str]) -> list[list[str]]:
    """BM25's tokens of `texts` (those the chunking stream tokenized already taken from it)."""
    proto, memo = ctx.bm25_proto, ctx.bm25_tokens
    out = [memo.get((t, k == "code")) for t, k in zip(texts, kinds)]
    memo.clear()
    return [
        tokens if tokens is not None else tokenize(t, proto.stem, proto.identifiers, proto.compounds and k == "code")
        for tokens, t, k in zip(out, texts, kinds)
    ]


def _build_bm25(ctx: BuildContext, texts: list[str], gen: Path, kinds: list[str]) -> None:
    proto = ctx.bm25_proto
    BM25Index(
        proto.engine, k1=proto.k1, b=proto.b, stem=proto.stem, identifiers=proto.identifiers, compounds=proto.compounds
    ).build(texts, kinds).save(gen / "bm25")
