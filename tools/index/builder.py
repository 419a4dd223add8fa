"""Build or update an index folder atomically and incrementally.

Every build writes a fresh generation folder `gen-<n>/`, fsyncs it, then
atomically replaces `CURRENT` (temp file + os.replace) and only then deletes
older generations, keeping the one it replaced: an interruption at any point
leaves the previous generation loadable, and a reader that read the old
`CURRENT` just before the switch still finds its files (`HybridIndex.open`
re-reads `CURRENT` if they vanish anyway). One builder writes an index at a
time (`IndexLock`, a `flock` on `<index>/.lock`): a second one waits up to
`lock_wait_s` seconds (None: for ever), then fails with `IndexBusyError`. Unchanged documents (same doc_id and content hash, same
chunking and embedding settings) keep their chunks and vectors; only added or
changed documents are chunked and embedded. BM25, FAISS and the sparse subset
are rebuilt from all rows each generation (they are cheap next to embedding).

Indexing adds: documents already in the index and not among the paths given
are kept. Removal is explicit: `sync=True` removes the indexed documents
under the given folders (ids with their prefix) that are no longer found
there, and `remove=[...]` removes documents by id, folder prefix or glob.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from datetime import datetime, timezone
from importlib import metadata
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ragsieve.tools.index.bm25 import BM25Index
from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.index.dense import DEFAULT_MODEL, DenseIndex, Embedder, canonical_model_name
from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.hybrid import CURRENT, MANIFEST, current_generation, read_manifest
from ragsieve.tools.index.checkpoint import EmbedCheckpoint, text_key
from ragsieve.tools.index.lock import IndexLock
from ragsieve.tools.ingest.loaders import LoadResult, load_documents
from ragsieve.tools.ingest.path_filter import PathFilter, matches_any
from ragsieve.tools.ingest.walk import LoadStats, root_id
from ragsieve.tools.modes import BM25Engine, FaissKind
from ragsieve.tools.filters.sparse import find_sparse_rows
from ragsieve.tools.index.store import ChunkStore
from ragsieve.tools.types import Chunk, Document

log = logging.getLogger(__name__)
FORMAT_VERSION = 1
_GEN = re.compile(r"^gen-(\d+)$")


class BuildReport(BaseModel):
    index_dir: str
    generation: str
    written: bool
    load: dict
    load_summary: str
    docs_added: int
    docs_updated: int
    docs_removed: int
    docs_unchanged: int
    chunks_total: int
    chunks_embedded: int
    embed_seconds: float = 0.0
    sparse_rows: int
    seconds: float
    problems: list[tuple[str, str]] = []  # skipped paths a user should look at, with the reason

    def summary(self) -> str:
        state = f"wrote {self.generation}" if self.written else f"unchanged ({self.generation})"
        return (f"{state}: {self.docs_added} added, {self.docs_updated} updated, {self.docs_removed} removed, "
                f"{self.docs_unchanged} unchanged documents; {self.chunks_total} chunks, "
                f"{self.chunks_embedded} embedded; {self.sparse_rows} sparse; {self.seconds:.1f}s")


def indexed_text(chunk: Chunk) -> str:
    """What BM25 and the embedder see: the document title, then the chunk text."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def corpus_fingerprint(doc_hashes: dict[str, str]) -> str:
    """sha256 over the sorted (doc_id, content_hash) pairs."""
    h = hashlib.sha256()
    for doc_id in sorted(doc_hashes):
        h.update(f"{doc_id}\0{doc_hashes[doc_id]}\n".encode("utf-8"))
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _fsync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*")) + [folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _live_generation(root: Path) -> Path | None:
    try:
        return current_generation(root)
    except IndexMissingError:
        return None


class IndexBuilder:
    """Index files and folders into `index_dir`; one public method, `build(paths)`."""

    def __init__(self, index_dir: str | Path, *, chunk_tokens: int = 200, embedding_model: str | None = None,
                 faiss_index: str | FaissKind = FaissKind.FLAT, bm25_engine: str | BM25Engine = BM25Engine.BM25S,
                 batch_size: int = 64, sparse_percentile: float = 10.0,
                 progress: bool | Callable[[str, int, int], None] = True, embedder: Embedder | None = None, bm25_k1: float = 0.9,
                 bm25_b: float = 0.4, bm25_stem: bool = True, hnsw_m: int = 32, hnsw_ef_search: int = 128,
                 index_titles: bool = True, lock_wait_s: float | None = 300.0,
                 code_chunking: str = "syntax", symbol_headers: bool = True,
                 path_filter: PathFilter | None = None, base_url: str | None = None) -> None:
        self.root = Path(index_dir)
        self.lock_wait_s = lock_wait_s
        IndexLock(self.root, lock_wait_s)  # checks the value
        self.chunker = Chunker(chunk_tokens, code_chunking, symbol_headers)
        self.path_filter = path_filter if path_filter is not None else PathFilter()
        self.base_url = base_url
        if embedder is not None and embedding_model is not None and \
                canonical_model_name(embedding_model) != canonical_model_name(embedder.name):
            raise UsageError(f"embedding_model {embedding_model!r} differs from the given embedder {embedder.name!r}")
        self.model = canonical_model_name(embedding_model or (embedder.name if embedder else DEFAULT_MODEL))
        if batch_size < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        if not 0.0 < sparse_percentile < 100.0:
            raise UsageError(f"sparse_percentile must be in (0, 100), got {sparse_percentile}")
        self.dense_proto = DenseIndex(faiss_index, hnsw_m=hnsw_m, ef_search=hnsw_ef_search)
        self.bm25_proto = BM25Index(bm25_engine, k1=bm25_k1, b=bm25_b, stem=bm25_stem)
        self.batch_size, self.progress, self._embedder = batch_size, progress, embedder
        self.sparse_percentile = sparse_percentile
        self.index_titles = index_titles

    def _settings(self) -> dict:
        """Settings whose change forces a new generation; `chunking` ones also force re-embedding."""
        return {"chunking": {"model": self.model, "chunk_tokens": self.chunker.chunk_tokens,
                             "index_titles": self.index_titles, "code_chunking": self.chunker.code_chunking.value,
                             "symbol_headers": self.chunker.symbol_headers},
                "faiss": self.dense_proto.params, "bm25": self.bm25_proto.params,
                "sparse": {"percentile": self.sparse_percentile}}

    def _embedder_for(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.model, batch_size=self.batch_size)
        return self._embedder

    def build(self, paths: list[str | Path], rebuild: bool = False, *, sync: bool = False,
              remove: list[str] | None = None, documents: list[Document] | None = None) -> BuildReport:
        """Add or update `paths` (and ready-made `documents`, e.g. crawled pages) in the index.

        `rebuild=True` ignores the previous generation (required to change
        model); `sync=True` also removes documents under `paths` that are gone;
        `remove` lists ids, id prefixes (`docs/old/`) or globs to remove.
        """
        start = time.perf_counter()
        loaded = load_documents(paths, progress=self._progress_callback(), path_filter=self.path_filter,
                                base_url=self.base_url) if paths else \
            LoadResult(documents=[], stats=LoadStats())
        docs = loaded.documents + list(documents or [])
        if not docs and not remove and not sync:
            raise UsageError(f"nothing to index in {[str(p) for p in paths]}: {loaded.stats.summary()}")
        ids = [d.doc_id for d in docs]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise UsageError(f"duplicate document ids: {dup}")
        prefixes = [root_id(p) + ("/" if Path(p).is_dir() else "") for p in paths] if sync else []
        with IndexLock(self.root, self.lock_wait_s):
            return self._build_locked(docs, loaded, rebuild, start, prefixes, list(remove or []))

    def _build_locked(self, docs: list[Document], loaded, rebuild: bool, start: float,
                      sync_prefixes: list[str], remove: list[str]) -> BuildReport:
        settings = self._settings()
        prev_gen = None if rebuild else current_generation(self.root)
        prev = read_manifest(prev_gen) if prev_gen is not None and (prev_gen / MANIFEST).is_file() else None
        if prev is not None and prev["embedding"]["model"] != self.model:
            raise UsageError(f"index {self.root} was built with {prev['embedding']['model']!r}; refusing to mix in "
                             f"{self.model!r} (rebuild from scratch with rebuild=True / --rebuild)")
        reuse = prev is not None and prev["settings"]["chunking"] == settings["chunking"]
        if prev is not None and not reuse:
            with ChunkStore(prev_gen / "chunks.sqlite", read_only=True) as old:
                others = [i for i in old.documents() if i not in {d.doc_id for d in docs}]
            if others:
                raise UsageError(f"the chunking settings changed, and the index holds {len(others)} documents not "
                                 f"among these paths (e.g. {others[0]!r}) that cannot be re-chunked: index every "
                                 f"path again with --rebuild")
        prev_store = ChunkStore(prev_gen / "chunks.sqlite", read_only=True) if reuse else None
        try:
            prev_docs = prev_store.documents() if prev_store else {}
            loaded_ids = {d.doc_id for d in docs}
            gone = {i for i in prev_docs if i not in loaded_ids and (
                any(i.startswith(p) or i == p for p in sync_prefixes) or matches_any(i, remove))}
            if remove and not any(matches_any(i, remove) for i in prev_docs):
                raise UsageError(f"nothing in index {self.root} matches {remove} (give document ids, a folder "
                                 f"prefix ending in '/' or a glob)")
            sources = prev_store.document_sources() if prev_store else {}
            kept = [Document(doc_id=i, source=sources[i], text="", content_hash=h)
                    for i, h in prev_docs.items() if i not in loaded_ids and i not in gone]
            docs = docs + kept
            if not docs:
                raise UsageError("removing these documents would leave the index empty; delete the folder instead")
            new_hashes = {d.doc_id: d.content_hash for d in docs}
            unchanged = {i for i, h in new_hashes.items() if prev_docs.get(i) == h}
            counts = {"docs_added": sum(1 for i in new_hashes if i not in prev_docs),
                      "docs_updated": sum(1 for i in new_hashes if i in prev_docs and i not in unchanged),
                      "docs_removed": sum(1 for i in prev_docs if i not in new_hashes),
                      "docs_unchanged": len(unchanged)}
            common = {"index_dir": str(self.root), "load": vars(loaded.stats) | {"skipped": len(loaded.stats.skipped)},
                      "load_summary": loaded.stats.summary(), "problems": loaded.stats.problems(), **counts}
            if prev is not None and reuse and prev["settings"] == settings and len(unchanged) == len(docs) \
                    and counts["docs_removed"] == 0:
                return BuildReport(generation=prev_gen.name, written=False, chunks_total=prev["counts"]["chunks"],
                                   chunks_embedded=0, sparse_rows=prev["sparse"]["rows"],
                                   seconds=time.perf_counter() - start, **common)
            gen = self._new_generation()
            try:
                manifest = self._write(gen, docs, unchanged, prev_store, prev_gen, settings, new_hashes)
            except BaseException:
                shutil.rmtree(gen, ignore_errors=True)
                raise
        finally:
            if prev_store is not None:
                prev_store.close()
        self._publish(gen, keep=prev_gen if prev_gen is not None else _live_generation(self.root))
        EmbedCheckpoint(self.root, self.model).clear()
        return BuildReport(generation=gen.name, written=True, chunks_total=manifest["counts"]["chunks"],
                           chunks_embedded=manifest["counts"]["embedded_this_run"],
                           embed_seconds=manifest["counts"]["embed_seconds"],
                           sparse_rows=manifest["sparse"]["rows"], seconds=time.perf_counter() - start, **common)

    def _new_generation(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        numbers = [int(m.group(1)) for p in self.root.iterdir() if (m := _GEN.match(p.name))]
        gen = self.root / f"gen-{max(numbers, default=0) + 1}"
        gen.mkdir()
        return gen

    def _write(self, gen: Path, docs: list[Document], unchanged: set[str], prev_store: ChunkStore | None,
               prev_gen: Path | None, settings: dict, hashes: dict[str, str]) -> dict:
        store = ChunkStore(gen / "chunks.sqlite")
        prev_rows = prev_store.document_rows() if prev_store else {}
        prev_vectors = np.load(prev_gen / "vectors.npy", mmap_mode="r") if prev_store else None
        texts: list[str] = []
        reused: list[tuple[int, int, int]] = []  # (new first row, old first row, n)
        to_embed: list[int] = []
        try:
            for doc in docs:
                if doc.doc_id in unchanged:
                    chunks = prev_store.chunks_of(doc.doc_id)
                    reused.append((store.count(), prev_rows[doc.doc_id][0], len(chunks)))
                else:
                    chunks = self.chunker.run(doc)
                    to_embed.extend(range(store.count(), store.count() + len(chunks)))
                store.add_document(doc.doc_id, doc.source, doc.content_hash, chunks)
                texts.extend(indexed_text(c) if self.index_titles else c.text for c in chunks)
            store.commit()
            n = store.count()
        finally:
            store.close()
        if n == 0:
            raise UsageError("the documents produced no chunks to index")
        t0 = time.perf_counter()
        vectors = self._vectors(n, texts, reused, to_embed, prev_vectors)
        embed_seconds = round(time.perf_counter() - t0, 3)
        self.bm25_proto.build(texts).save(gen / "bm25")
        self.dense_proto.build(vectors).save(gen)
        sparse = find_sparse_rows(vectors, self.sparse_percentile)
        (gen / "sparse.json").write_text(sparse.model_dump_json(), encoding="utf-8")
        manifest = {
            "format_version": FORMAT_VERSION, "ragsieve_version": _version("ragsieve"), "generation": gen.name,
            "embedding": {"model": self.model, "dimension": int(vectors.shape[1])},
            "faiss": settings["faiss"], "bm25": settings["bm25"], "tokenizer": settings["bm25"]["tokenizer"],
            "chunk_tokens": self.chunker.chunk_tokens, "index_titles": self.index_titles, "settings": settings,
            "counts": {"documents": len(docs), "chunks": n, "embedded_this_run": len(to_embed),
                       "embed_seconds": embed_seconds},
            "sparse": {"rows": len(sparse.rows), "percentile": sparse.percentile, "cutoff": sparse.cutoff},
            "corpus_fingerprint": corpus_fingerprint(hashes),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "versions": {d: _version(d) for d in ("faiss-cpu", "bm25s", "rank-bm25", "sentence-transformers")},
        }
        (gen / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        _fsync_tree(gen)
        return manifest

    def _vectors(self, n: int, texts: list[str], reused: list[tuple[int, int, int]], to_embed: list[int],
                 prev_vectors: np.ndarray | None) -> np.ndarray:
        dim = prev_vectors.shape[1] if prev_vectors is not None else None
        if to_embed:
            dim = self._embedder_for().dimension
        vectors = np.zeros((n, dim), dtype=np.float32)
        for new, old, count in reused:
            vectors[new:new + count] = prev_vectors[old:old + count]
        if to_embed:
            checkpoint = EmbedCheckpoint(self.root, self.model)
            saved = checkpoint.lookup()
            todo = []
            for r in to_embed:
                vec = saved.get(text_key(texts[r]))
                if vec is not None and vec.shape == (dim,):
                    vectors[r] = vec
                else:
                    todo.append(r)
            if saved:
                log.info("embedding checkpoint: %d of %d chunks already embedded", len(to_embed) - len(todo),
                         len(to_embed))
            report = self._progress_callback()
            done = len(to_embed) - len(todo)
            report("embedding", done, len(to_embed))
            step = self.batch_size * 4
            for s in range(0, len(todo), step):
                rows = todo[s:s + step]
                batch = [texts[r] for r in rows]
                vectors[rows] = self._embedder_for().embed(batch)
                checkpoint.save([text_key(t) for t in batch], vectors[rows])
                done += len(rows)
                report("embedding", done, len(to_embed))
            report("embedding", -1, len(to_embed))
        return vectors

    def _progress_callback(self) -> Callable[[str, int, int], None]:
        """`progress` as a callback (stage, done, total; done == -1 closes): the caller's, a tqdm bar, or none."""
        if callable(self.progress):
            return self.progress
        if not self.progress:
            return lambda stage, done, total: None
        from tqdm import tqdm

        bars: dict[str, tqdm] = {}

        def report(stage: str, done: int, total: int) -> None:
            bar = bars.get(stage)
            if bar is None:
                bar = bars[stage] = tqdm(total=total, desc=stage, unit="chunk")
            if done < 0:
                bar.close()
                return
            bar.update(done - bar.n)
        return report

    def _publish(self, gen: Path, keep: Path | None = None) -> None:
        """Point CURRENT at `gen` atomically, then delete the generations other than `gen` and `keep`."""
        tmp = self.root / f".{CURRENT}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(gen.name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / CURRENT)
        log.info("index %s: CURRENT -> %s", self.root, gen.name)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for old in self.root.iterdir():
            if _GEN.match(old.name) and old.name not in (gen.name, keep.name if keep else None):
                shutil.rmtree(old, ignore_errors=True)
