"""Build or update an index folder atomically and incrementally.

Every build writes a fresh generation folder `gen-<n>/`, fsyncs it, then
(`ragsieve.tools.index.generations`) atomically replaces `CURRENT` (temp file + os.replace) and only then deletes
older generations, keeping the one it replaced: an interruption at any point
leaves the previous generation loadable, and a reader that read the old
`CURRENT` just before the switch still finds its files (`HybridIndex.open`
re-reads `CURRENT` if they vanish anyway). One builder writes an index at a
time (`IndexLock`, a `flock` on `<index>/.lock`): a second one waits up to
`lock_wait_s` seconds (None: for ever), then fails with `IndexBusyError`. Unchanged documents (same doc_id and content hash, same
chunking and embedding settings) keep their chunks and vectors; only added or
changed documents are chunked and embedded. BM25, FAISS and the sparse subset
are rebuilt from all rows each generation (they are cheap next to embedding).
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ragsieve.tools.index.bm25 import BM25Index
from ragsieve.tools.index.embed_cache import EmbeddingCache, embed_resumable, text_key
from ragsieve.tools.index.generations import fsync_tree, live_generation, new_generation, switch_current
from ragsieve.tools.index.progress import progress_reporter
from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.index.dense import DEFAULT_MODEL, DenseIndex, Embedder, canonical_model_name
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.hybrid import MANIFEST, current_generation, read_manifest
from ragsieve.tools.index.lock import IndexLock
from ragsieve.tools.ingest.loaders import load_documents, site_documents
from ragsieve.tools.ingest.walk import source_root
from ragsieve.tools.modes import BM25Engine, FaissKind
from ragsieve.tools.filters.sparse import find_sparse_rows
from ragsieve.tools.index.store import ChunkStore
from ragsieve.tools.types import Chunk, Document

log = logging.getLogger(__name__)
FORMAT_VERSION = 1


class BuildReport(BaseModel):
    index_dir: str
    generation: str
    written: bool
    load: dict
    load_summary: str
    docs_added: int
    docs_updated: int
    docs_removed: int
    docs_kept: int = 0  # indexed before from other paths and left in place (not re-read)
    docs_unchanged: int
    chunks_total: int
    chunks_embedded: int
    embed_seconds: float = 0.0
    sparse_rows: int
    seconds: float
    problems: list[tuple[str, str]] = []  # skipped paths a user should look at, with the reason
    excluded: dict[str, int] = {}  # reason -> files/folders skipped by --include/--exclude/default excludes

    def summary(self) -> str:
        state = f"wrote {self.generation}" if self.written else f"unchanged ({self.generation})"
        return (f"{state}: {self.docs_added} added, {self.docs_updated} updated, {self.docs_removed} removed, "
                f"{self.docs_unchanged} unchanged, {self.docs_kept} kept documents; {self.chunks_total} chunks, "
                f"{self.chunks_embedded} embedded; {self.sparse_rows} sparse; {self.seconds:.1f}s")


def indexed_text(chunk: Chunk, symbol_headers: bool = True) -> str:
    """What BM25 and the embedder see: a header (the title; for code the path and the enclosing
    symbols, `http/client.py HTTPResponse._read_chunked`), then the chunk text."""
    if chunk.symbol and symbol_headers:
        return f"{chunk.source} {chunk.symbol}\n{chunk.text}"
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def _scopes(paths, base) -> list[str]:
    """The id prefixes this build covers: `examples/docs/` for a folder, the id itself for a file."""
    from ragsieve.tools.ingest.walk import doc_id_for

    out = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            out.append(doc_id_for(path, path / "\0", base)[:-1])
        elif path.exists():
            out.append(doc_id_for(path, path, base))
    return out


def _in_scope(doc_id: str, scopes) -> bool:
    return any(doc_id.startswith(s) if s.endswith("/") else (doc_id == s or doc_id.startswith(s + "#"))
               for s in scopes)


def _excluded(stats) -> dict[str, int]:
    out: dict[str, int] = {}
    for _path, why in stats.skipped:
        if why.startswith(("excluded by", "not matched by", "skipped by default")):
            key = why.split(";")[0].replace("skipped by default (", "default: ")
            out[key] = out.get(key, 0) + 1
    return out


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


class IndexBuilder:
    """Index files and folders into `index_dir`; one public method, `build(paths)`."""

    def __init__(self, index_dir: str | Path, *, chunk_tokens: int = 200, embedding_model: str | None = None,
                 faiss_index: str | FaissKind = FaissKind.FLAT, bm25_engine: str | BM25Engine = BM25Engine.BM25S,
                 batch_size: int = 64, sparse_percentile: float = 10.0,
                 progress: bool = True, embedder: Embedder | None = None, bm25_k1: float = 0.9,
                 bm25_b: float = 0.4, bm25_stem: bool = True, bm25_identifiers: bool = True, hnsw_m: int = 32, hnsw_ef_search: int = 128,
                 index_titles: bool = True, lock_wait_s: float | None = 300.0, syntax_chunks: bool = True,
                 symbol_headers: bool = True, encoder: str = "torch", overlap: bool = True) -> None:
        self.root = Path(index_dir)
        self.overlap = bool(overlap)  # build BM25 (and write the chunk store's checkpoints) while encoding
        self.lock_wait_s = lock_wait_s
        IndexLock(self.root, lock_wait_s)  # checks the value
        self.chunker = Chunker(chunk_tokens, syntax=syntax_chunks)
        self.symbol_headers = symbol_headers
        if encoder not in Embedder.ENCODERS:
            raise UsageError(f"invalid encoder {encoder!r}: choose one of {', '.join(Embedder.ENCODERS)}")
        self.encoder = embedder.encoder if embedder is not None else encoder
        if embedder is not None and embedding_model is not None and \
                canonical_model_name(embedding_model) != canonical_model_name(embedder.name):
            raise UsageError(f"embedding_model {embedding_model!r} differs from the given embedder {embedder.name!r}")
        self.model = canonical_model_name(embedding_model or (embedder.name if embedder else DEFAULT_MODEL))
        if batch_size < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        if not 0.0 < sparse_percentile < 100.0:
            raise UsageError(f"sparse_percentile must be in (0, 100), got {sparse_percentile}")
        self.dense_proto = DenseIndex(faiss_index, hnsw_m=hnsw_m, ef_search=hnsw_ef_search)
        self.bm25_proto = BM25Index(bm25_engine, k1=bm25_k1, b=bm25_b, stem=bm25_stem, identifiers=bm25_identifiers)
        self.batch_size, self.progress, self._embedder = batch_size, progress, embedder
        self.sparse_percentile = sparse_percentile
        self.index_titles = index_titles

    def _settings(self) -> dict:
        """Settings whose change forces a new generation; `chunking` ones also force re-embedding."""
        return {"chunking": {"model": self.model, "chunk_tokens": self.chunker.chunk_tokens,
                             "index_titles": self.index_titles,
                             "code": "cast-1" if self.chunker.syntax else "lines",
                             "symbol_headers": self.symbol_headers,
                             # torch and onnx agree to float precision (one embedding space); int8 does not
                             "precision": "int8" if self.encoder == "onnx-int8" else "fp32"},
                "faiss": self.dense_proto.params, "bm25": self.bm25_proto.params,
                "sparse": {"percentile": self.sparse_percentile}}

    def _embedder_for(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.model, batch_size=self.batch_size, encoder=self.encoder)
        return self._embedder

    def build(self, paths: list[str | Path], rebuild: bool = False, *, sync: bool = False,
              selection=None, base_url: str | None = None, crawl: dict | None = None) -> BuildReport:
        """Index `paths`, adding to the index: documents indexed before from other paths stay
        (`docs_kept`). `sync=True` makes the index exactly `paths` (the others are removed);
        `rebuild=True` ignores the previous generation (required to change model)."""
        start = time.perf_counter()
        urls = [str(p) for p in paths if str(p).startswith(("http://", "https://"))]
        paths = [p for p in paths if str(p) not in urls]
        base = self._source_root(paths, rebuild) if paths else None
        if paths:
            loaded = load_documents(paths, progress=self.progress is True, selection=selection, base=base,
                                    base_url=base_url)
        else:
            from ragsieve.tools.ingest.loaders import LoadResult
            from ragsieve.tools.ingest.walk import LoadStats

            loaded = LoadResult(documents=[], stats=LoadStats())
        docs = list(loaded.documents)
        web_scopes, self.crawl_reports = [], []
        for url in urls:  # websites: crawled politely, each page a document cited by its URL
            crawler = self._crawler(url, crawl or {})
            report = crawler.run()
            self.crawl_reports.append(report)
            web_scopes.append(crawler.scope)
            docs.extend(site_documents(report.pages))  # the site-wide title suffix dropped
            loaded.stats.skipped.extend((u, f"crawl: {why}") for u, why in report.skipped)
        if not docs:
            raise UsageError(f"nothing to index in {[str(p) for p in paths]}: {loaded.stats.summary()}")
        ids = [d.doc_id for d in docs]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise UsageError(f"duplicate document ids: {dup}")
        scopes = _scopes(paths, base) + web_scopes
        with IndexLock(self.root, self.lock_wait_s):
            return self._build_locked(docs, loaded, paths, rebuild, start, sync, scopes=scopes)

    def _crawler(self, url: str, options: dict):
        import hashlib as _hashlib

        from ragsieve.tools.ingest.crawler import Crawler

        state_dir = self.root / "crawl" / _hashlib.sha1(url.encode()).hexdigest()[:12]
        return Crawler(url, state_dir=state_dir, **options)

    def _source_root(self, paths, rebuild: bool) -> Path | None:
        """Ids are paths below the index's source root: the one recorded at its first build, else the
        git checkout (or the parent folder) of the first path given."""
        gen = None if rebuild else current_generation(self.root)
        if gen is not None and (gen / MANIFEST).is_file():
            recorded = read_manifest(gen).get("source_root")
            if recorded:
                return Path(recorded)
            return None  # an index from before source roots: ids as they were (relative to the cwd)
        folders = [p for p in paths if Path(p).is_dir()] or list(paths)
        self._new_root = source_root(folders[0]) if folders else None
        return self._new_root

    def remove(self, prefixes: list[str]) -> BuildReport:
        """A new generation without the documents whose id is one of `prefixes` or lies below one
        (`examples/docs` removes `examples/docs/...`); nothing is embedded. Unknown prefixes are refused."""
        start = time.perf_counter()
        with IndexLock(self.root, self.lock_wait_s):
            prev_gen = current_generation(self.root)
            if prev_gen is None:
                raise UsageError(f"no index at {self.root} to remove documents from")
            store = ChunkStore(prev_gen / "chunks.sqlite", read_only=True)
            try:
                ids = list(store.documents())
            finally:
                store.close()
            wanted = [p.rstrip("/") for p in prefixes if p.strip()]
            hit = {i for i in ids for p in wanted if i == p or i.startswith(p + "/") or i.startswith(p + "#")}
            unmatched = [p for p in wanted if not any(i == p or i.startswith(p + "/") or i.startswith(p + "#")
                                                      for i in ids)]
            if unmatched:
                raise UsageError(f"no indexed document matches {unmatched} (ids look like {ids[0]!r})")
            if len(hit) == len(ids):
                raise UsageError("that would remove every document; delete the index folder instead")
            from ragsieve.tools.ingest.walk import LoadStats

            loaded = type("Loaded", (), {"stats": LoadStats()})()
            return self._build_locked([], loaded, [], False, start, False, remove=hit)

    def _build_locked(self, docs: list[Document], loaded, paths, rebuild: bool, start: float, sync: bool = False,
                      remove: set[str] | None = None, scopes: list[str] = ()) -> BuildReport:
        settings = self._settings()
        prev_gen = None if rebuild else current_generation(self.root)
        prev = read_manifest(prev_gen) if prev_gen is not None and (prev_gen / MANIFEST).is_file() else None
        if prev is not None and prev["embedding"]["model"] != self.model:
            raise UsageError(f"index {self.root} was built with {prev['embedding']['model']!r}; refusing to mix in "
                             f"{self.model!r} (rebuild from scratch with rebuild=True / --rebuild)")
        reuse = prev is not None and prev["settings"]["chunking"] == settings["chunking"]
        prev_store = ChunkStore(prev_gen / "chunks.sqlite", read_only=True) if reuse else None
        try:
            prev_docs = prev_store.documents() if prev_store else {}
            new_hashes = {d.doc_id: d.content_hash for d in docs}
            unchanged = {i for i, h in new_hashes.items() if prev_docs.get(i) == h}
            gone = [i for i in prev_docs if i not in new_hashes]
            # gone from a path indexed now: removed; indexed before from another path: kept (unless sync)
            kept = [] if sync else [i for i in gone if i not in (remove or set()) and not _in_scope(i, scopes)]
            if kept and not reuse:
                raise UsageError(f"{len(kept)} documents indexed before are not in these paths and the chunking "
                                 f"settings changed: index them again too, or pass --sync to keep only these paths")
            counts = {"docs_added": sum(1 for i in new_hashes if i not in prev_docs),
                      "docs_updated": sum(1 for i in new_hashes if i in prev_docs and i not in unchanged),
                      "docs_removed": len(gone) - len(kept),
                      "docs_unchanged": len(unchanged), "docs_kept": len(kept)}
            common = {"index_dir": str(self.root), "load": vars(loaded.stats) | {"skipped": len(loaded.stats.skipped)},
                      "load_summary": loaded.stats.summary(), "problems": loaded.stats.problems(),
                      "excluded": _excluded(loaded.stats), **counts}
            if prev is not None and reuse and prev["settings"] == settings and len(unchanged) == len(docs) \
                    and counts["docs_removed"] == 0 and not remove:
                return BuildReport(generation=prev_gen.name, written=False, chunks_total=prev["counts"]["chunks"],
                                   chunks_embedded=0, sparse_rows=prev["sparse"]["rows"],
                                   seconds=time.perf_counter() - start, **common)
            gen = new_generation(self.root)
            try:
                hashes = new_hashes | {i: prev_docs[i] for i in kept}
                manifest = self._write(gen, docs, unchanged, prev_store, prev_gen, settings, hashes, kept)
            except BaseException:
                shutil.rmtree(gen, ignore_errors=True)
                raise
        finally:
            if prev_store is not None:
                prev_store.close()
        switch_current(self.root, gen, keep=prev_gen if prev_gen is not None else live_generation(self.root))
        if (self.root / "embeddings.sqlite").exists():  # the checkpoint keeps what the live index holds
            cache = EmbeddingCache(self.root / "embeddings.sqlite", self.model)
            try:
                cache.prune(getattr(self, "_last_keys", set()))
            finally:
                cache.close()
        return BuildReport(generation=gen.name, written=True, chunks_total=manifest["counts"]["chunks"],
                           chunks_embedded=manifest["counts"]["embedded_this_run"],
                           embed_seconds=manifest["counts"]["embed_seconds"],
                           sparse_rows=manifest["sparse"]["rows"], seconds=time.perf_counter() - start, **common)

    def _write(self, gen: Path, docs: list[Document], unchanged: set[str], prev_store: ChunkStore | None,
               prev_gen: Path | None, settings: dict, hashes: dict[str, str], kept: list[str] = ()) -> dict:
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
                texts.extend(indexed_text(c, self.symbol_headers) if self.index_titles else c.text for c in chunks)
            for doc_id in kept:  # indexed before from other paths: carried over, never re-embedded
                chunks = prev_store.chunks_of(doc_id)
                reused.append((store.count(), prev_rows[doc_id][0], len(chunks)))
                store.add_document(doc_id, prev_store.source_of(doc_id), hashes[doc_id], chunks)
                texts.extend(indexed_text(c, self.symbol_headers) if self.index_titles else c.text for c in chunks)
            store.commit()
            n = store.count()
            self._last_keys = {text_key(t) for t in texts}
        finally:
            store.close()
        if n == 0:
            raise UsageError("the documents produced no chunks to index")
        t0 = time.perf_counter()
        with ThreadPoolExecutor(1, thread_name_prefix="ragsieve-bm25") as pool:
            # BM25 tokenising and indexing is Python work; the encoder spends its time in native code that
            # releases the GIL, so the two overlap (benchmarks/scale.py `build`: with and without)
            bm25_job = pool.submit(self._build_bm25, texts, gen) if self.overlap else None
            vectors = self._vectors(n, texts, reused, to_embed, prev_vectors)
            embed_seconds = round(time.perf_counter() - t0, 3)
            self._build_bm25(texts, gen) if bm25_job is None else bm25_job.result()
        self.dense_proto.build(vectors).save(gen)
        sparse = find_sparse_rows(vectors, self.sparse_percentile)
        (gen / "sparse.json").write_text(sparse.model_dump_json(), encoding="utf-8")
        manifest = {
            "format_version": FORMAT_VERSION, "ragsieve_version": _version("ragsieve"), "generation": gen.name,
            "embedding": {"model": self.model, "dimension": int(vectors.shape[1]), "encoder": self.encoder},
            "faiss": settings["faiss"], "bm25": settings["bm25"], "tokenizer": settings["bm25"]["tokenizer"],
            "chunk_tokens": self.chunker.chunk_tokens, "index_titles": self.index_titles, "settings": settings,
            "counts": {"documents": len(docs) + len(kept), "chunks": n, "embedded_this_run": len(to_embed),
                       "embed_seconds": embed_seconds},
            "sparse": {"rows": len(sparse.rows), "percentile": sparse.percentile, "cutoff": sparse.cutoff},
            "corpus_fingerprint": corpus_fingerprint(hashes),
            "source_root": str(self._recorded_root(prev_gen)) if self._recorded_root(prev_gen) else None,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "versions": {d: _version(d) for d in ("faiss-cpu", "bm25s", "rank-bm25", "sentence-transformers")},
        }
        (gen / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        fsync_tree(gen)
        return manifest

    def _build_bm25(self, texts: list[str], gen: Path) -> None:
        BM25Index(self.bm25_proto.engine, k1=self.bm25_proto.k1, b=self.bm25_proto.b,
                  stem=self.bm25_proto.stem, identifiers=self.bm25_proto.identifiers).build(texts).save(gen / "bm25")

    def _recorded_root(self, prev_gen: Path | None) -> Path | None:
        if prev_gen is not None and (prev_gen / MANIFEST).is_file():
            recorded = read_manifest(prev_gen).get("source_root")
            return Path(recorded) if recorded else None
        return getattr(self, "_new_root", None)

    def _vectors(self, n: int, texts: list[str], reused: list[tuple[int, int, int]], to_embed: list[int],
                 prev_vectors: np.ndarray | None) -> np.ndarray:
        dim = prev_vectors.shape[1] if prev_vectors is not None else None
        if to_embed:
            dim = self._embedder_for().dimension
        vectors = np.zeros((n, dim), dtype=np.float32)
        for new, old, count in reused:
            vectors[new:new + count] = prev_vectors[old:old + count]
        if to_embed:
            cache = EmbeddingCache(self.root / "embeddings.sqlite", self.model, dim)
            try:
                self.resumed_embeddings = embed_resumable(
                    cache, texts, to_embed, vectors, lambda batch: self._embedder_for().embed(batch),
                    self.batch_size * 4, lambda total: progress_reporter(self.progress, total))
            finally:
                cache.close()
        return vectors
