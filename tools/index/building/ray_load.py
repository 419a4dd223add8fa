"""Loading and chunking on a Ray cluster: the first stages of `ragsieve index --ray`'s Ray Data pipeline.

The driver walks the paths (`collect_files`: names and ignore rules only, no
file is read) and sends one item per file to Ray Data: `flat_map` loads a file
on a worker exactly as `load_documents` does (same loader functions, same
document ids) and emits one row per document; the rows are spread over blocks
and `map_batches` chunks them with the build's own `Chunker`. The driver
gathers documents, chunks and load statistics back in file order, so the build
that follows (rows, BM25, FAISS, the generation, a Milvus publish) is the one a
single-process build writes; the encoder actors (`ray_embed.RayEmbedStage.fill`)
then embed the chunks the checkpoint lacks. Two orderings stay in the driver,
because they need every document: duplicate BEIR ids across files (the first
file wins, as in `load_documents`) and the site-title cleanup of HTML pages,
whose chunks are therefore cut in the driver after it.

Workers read the files themselves: on a cluster the paths must be visible on
every node (a shared file system), as `docs/scaling.md` says.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest import loaders
from ragsieve.tools.ingest.pages import strip_site_titles
from ragsieve.tools.ingest.walk import LoadStats, collect_files
from ragsieve.tools.types import Chunk, Document

if TYPE_CHECKING:
    from ragsieve.tools.ingest.chunking import Chunker
    from ragsieve.tools.ingest.selection import Selection

HTML = (".html", ".htm")


def load_one(item: dict) -> list[dict]:
    """Rows for one file: one per document (`doc`, with `j` its position in the file) and one for the file's
    load statistics (`j = -1`), as `load_documents`' loop body does for that file."""
    stats, path = LoadStats(), Path(item["path"])
    found = loaders.read_one(path, stats, item["doc_id"], item["url"] or None, set(item["other_ids"]), syntax=item["syntax"])
    rows = [{"i": item["i"], "j": j, "doc": d.model_dump_json(), "stats": "", "chunks": ""} for j, d in enumerate(found)]
    return rows + [{"i": item["i"], "j": -1, "doc": "", "stats": json.dumps(dataclasses.asdict(stats)), "chunks": ""}]


def chunk_batch(batch: dict, chunker: Chunker) -> dict:
    """`map_batches` stage (Ray tasks): the chunks of each document row (HTML pages are left to the driver)."""
    out = []
    for doc_json in batch["doc"]:
        doc = Document.model_validate_json(str(doc_json)) if doc_json else None
        if doc is None or doc.doc_id.lower().endswith(HTML):
            out.append("")
        else:
            out.append(json.dumps([c.model_dump() for c in chunker.run(doc)]))
    return {**batch, "chunks": out}


def _merge(total: LoadStats, part: dict) -> None:
    for f in dataclasses.fields(LoadStats):
        if f.name == "skipped":
            total.skipped.extend(tuple(x) for x in part["skipped"])
        else:
            setattr(total, f.name, getattr(total, f.name) + part[f.name])


def load_and_chunk(
    ray: Any,  # the ray module (the optional ray extra)
    paths: list[str | Path],
    chunker: Chunker,
    *,
    selection: Selection | None = None,
    base: Path | None = None,
    base_url: str | None = None,
    parallelism: int = 4,
) -> tuple[loaders.LoadResult, dict[str, list[Chunk]]]:
    """(LoadResult, {doc_id: chunks}) for `paths`, loaded and chunked by a Ray Data pipeline."""
    if isinstance(paths, (str, Path)):
        raise UsageError(f"paths must be a list of paths, got the single path {str(paths)!r}")
    stats = LoadStats()
    refs = collect_files(list(paths), stats, selection, base)
    ids = sorted({i for _, i, _ in refs})
    items = [
        {
            "i": n,
            "path": os.path.abspath(f),
            "doc_id": i,
            "url": f"{base_url.rstrip('/')}/{below}" if base_url else "",
            "other_ids": ids,
            "syntax": chunker.syntax,
        }
        for n, (f, i, below) in enumerate(refs)
    ]
    if not items:
        return loaders.LoadResult(documents=[], stats=stats), {}
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the library prints nothing
    blocks = max(1, min(len(items), parallelism))
    ds = ray.data.from_items(items, override_num_blocks=blocks).flat_map(load_one)
    ds = ds.repartition(max(1, parallelism)).map_batches(
        chunk_batch, fn_kwargs={"chunker": chunker}, batch_size=64, batch_format="numpy"
    )
    rows = sorted(
        ((int(r["i"]), int(r["j"]), r["doc"], r["stats"], r["chunks"]) for r in ds.iter_rows()),
        key=lambda r: (r[0], r[1] if r[1] >= 0 else 1 << 40),
    )
    documents, prechunked, seen = [], {}, set()
    for _, j, doc_json, stats_json, chunks_json in rows:
        if j < 0:
            _merge(stats, json.loads(str(stats_json)))
            continue
        doc = Document.model_validate_json(str(doc_json))
        if doc.kind == "beir" and doc.doc_id in seen:  # a second BEIR file repeating an id: the first wins
            stats._skip("skipped_records", doc.source, "duplicate doc_id")
            continue
        seen.add(doc.doc_id)
        documents.append(doc)
        if chunks_json:
            prechunked[doc.doc_id] = [Chunk.model_validate(c) for c in json.loads(str(chunks_json))]
    strip_site_titles([d for d in documents if d.doc_id.lower().endswith(HTML)])
    stats.documents = len(documents)
    return loaders.LoadResult(documents=documents, stats=stats), prechunked
