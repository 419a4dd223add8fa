"""Build or update an index folder atomically and incrementally.

Every build writes a fresh generation folder `gen-<n>/`, fsyncs it, then
(`ragsieve.tools.index.local.generations`) atomically replaces `CURRENT` (temp file + os.replace) and only then deletes
older generations, keeping the one it replaced: an interruption at any point
leaves the previous generation loadable, and a reader that read the old
`CURRENT` just before the switch still finds its files (`HybridIndex.open`
re-reads `CURRENT` if they vanish anyway). One builder writes an index at a
time (`IndexLock`, a `flock` on `<index>/.lock`): a second one waits up to
`lock_wait_s` seconds (None: for ever), then fails with `IndexBusyError`.
Unchanged documents (same doc_id and content hash, same chunking and embedding
settings) keep their chunks, vectors and rows; only added or changed documents
are chunked and embedded (`ragsieve.tools.index.building.generation_writer`, rows by
`ragsieve.tools.index.building.layout`); in the incremental layout a change writes one
delta segment (`ragsieve.tools.index.building.incremental`). This module decides what a
build covers (scopes, kept, removed documents: `ragsieve.tools.index.building.change_plan`
finds them without listing the corpus); the report and helpers live in
`ragsieve.tools.index.building.report`.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ragsieve.tools import tracing
from ragsieve.tools.access.labels import set_front_matter
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.change_plan import ids_to_remove, listed_change, plan_change
from ragsieve.tools.index.building.context import BuildContext, checkpoint_model
from ragsieve.tools.index.building.embed_cache import EmbeddingCache, keep_live  # keyed by encoder (issue 28)
from ragsieve.tools.index.building.encoder_choice import choose_encoder
from ragsieve.tools.index.building.generation_writer import incremental_applies, write_generation
from ragsieve.tools.index.building.incremental import collect_stores
from ragsieve.tools.index.building.progress import Progress
from ragsieve.tools.index.building.report import UPGRADED_CELLS, BuildReport, embed_figures, load_figures
from ragsieve.tools.index.building.settings import generation_settings, resolve_long_code
from ragsieve.tools.index.building.sources import gather
from ragsieve.tools.index.building.windows import LongCode
from ragsieve.tools.index.embedders import known_dimension, mismatch, provider_of
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.model_names import DEFAULT_MODEL, canonical_model_name
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
from ragsieve.tools.index.local.generations import (
    MANIFEST,
    current_generation,
    live_generation,
    new_generation,
    read_manifest,
    switch_current,
)
from ragsieve.tools.index.local.lock import IndexLock
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.index.search.bm25 import BM25Index
from ragsieve.tools.index.search.dense import DenseIndex
from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.ingest.loaders import LoadResult, load_documents
from ragsieve.tools.ingest.walk import LoadStats, source_root
from ragsieve.tools.modes import BM25Engine, FaissKind
from ragsieve.tools.tracing.conventions import build_after
from ragsieve.tools.types import Document

if TYPE_CHECKING:
    from ragsieve.tools.index.building.ray_embed import RayEmbedStage
    from ragsieve.tools.ingest.selection import Selection

log = logging.getLogger(__name__)


STREAM_MIN_DOCS = 256  # below this, chunking is instant and the serial path is as fast


class IndexBuilder:
    """Index files and folders into `index_dir`; one public method, `build(paths)`."""

    def __init__(
        self,
        index_dir: str | Path,
        *,
        chunk_tokens: int = 200,
        embedding_model: str | None = None,
        faiss_index: str | FaissKind = FaissKind.FLAT,
        bm25_engine: str | BM25Engine = BM25Engine.BM25S,
        batch_size: int | None = None,
        sparse_percentile: float = 10.0,
        progress: Progress = True,
        embedder: Embedder | OpenAIEmbedder | None = None,
        bm25_k1: float = 0.9,
        bm25_b: float = 0.4,
        bm25_stem: bool = True,
        bm25_identifiers: bool = True,
        hnsw_m: int = 32,
        hnsw_ef_search: int = 128,
        index_titles: bool = True,
        lock_wait_s: float | None = 300.0,
        syntax_chunks: bool = True,
        symbol_headers: bool = True,
        encoder: str | None = None,
        overlap: bool = True,
        ray: RayEmbedStage | None = None,
        segments: bool = True,
        long_code: str | None = None,
        device: str = "auto",
    ) -> None:
        self.root = Path(index_dir)
        self.segments = bool(segments)  # False: whole-generation files (format 1), as before incremental layouts
        self.ray = ray  # a `ragsieve.tools.index.building.ray_embed.RayEmbedStage`: embed on a Ray cluster
        self.overlap = bool(overlap)  # build BM25 (and write the chunk store's checkpoints) while encoding
        # with overlap, this many fresh documents or more are chunked while the encoder embeds (`embed_stream`)
        self.stream_min_docs = STREAM_MIN_DOCS
        self.stream: bool | None = None  # None: on a GPU and with an endpoint, not with a local model on the CPU
        self._streamed, self._stream_seconds = 0, 0.0
        self._bm25_tokens: dict[tuple[str, bool], list[str]] = {}  # (text, code) -> tokens, from the stream
        self.lock_wait_s = lock_wait_s
        IndexLock(self.root, lock_wait_s)  # checks the value
        self.chunker = Chunker(chunk_tokens, syntax=syntax_chunks)
        self.symbol_headers = symbol_headers
        self.header_words = symbol_headers  # code headers spell their names in words (`report.indexed_text`)
        self._record_header_words = True  # False: the previous generation predates the setting (kept off)
        # long code chunks: the mean of their windows' vectors (`windows.py`); None: the index's recorded way
        # (`head` for an index built before), `windows` for a new one
        self.long_code = None if long_code is None else LongCode.parse(long_code)
        self.device, self.encoder = choose_encoder(
            self.root, embedder, encoder, device, on_cluster_gpus=ray is not None and ray.wants_gpus()
        )
        if (
            embedder is not None
            and embedding_model is not None
            and canonical_model_name(embedding_model) != canonical_model_name(embedder.name)
        ):
            raise UsageError(f"embedding_model {embedding_model!r} differs from the given embedder {embedder.name!r}")
        self.model = canonical_model_name(embedding_model or (embedder.name if embedder else DEFAULT_MODEL))
        self.provider = provider_of(embedder)  # any provider of ragsieve.tools.index.embedders, given as `embedder`
        if batch_size is None:  # a GPU is kept busy by larger batches (benchmarks/gpu.py)
            batch_size = 512 if self.device is not None and self.device.gpu else 64
        if batch_size < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        if not 0.0 < sparse_percentile < 100.0:
            raise UsageError(f"sparse_percentile must be in (0, 100), got {sparse_percentile}")
        self.dense_proto = DenseIndex(faiss_index, hnsw_m=hnsw_m, ef_search=hnsw_ef_search)
        self.bm25_proto = BM25Index(bm25_engine, k1=bm25_k1, b=bm25_b, stem=bm25_stem, identifiers=bm25_identifiers)
        self.batch_size, self.progress, self._embedder = batch_size, progress, embedder
        self.sparse_percentile = sparse_percentile
        self.index_titles = index_titles

    def _embedder_for(self) -> Embedder | OpenAIEmbedder:
        """The embedder, loaded now (a benchmark loads it before it times a build)."""
        ctx = self.context()
        self._embedder = ctx.embedder_for()
        return self._embedder

    def context(self) -> BuildContext:
        """What the build's helpers read: these settings as they are now, the embedder, the figures so far."""
        return BuildContext(
            root=self.root,
            chunker=self.chunker,
            model=self.model,
            provider=self.provider,
            encoder=self.encoder,
            device=self.device,
            batch_size=self.batch_size,
            progress=self.progress,
            bm25_proto=self.bm25_proto,
            dense_proto=self.dense_proto,
            sparse_percentile=self.sparse_percentile,
            index_titles=self.index_titles,
            symbol_headers=self.symbol_headers,
            header_words=self.header_words,
            long_code=self.long_code,
            ray=self.ray,
            overlap=self.overlap,
            stream=self.stream,
            stream_min_docs=self.stream_min_docs,
            segments=self.segments,
            embedder=self._embedder,
            new_root=getattr(self, "_new_root", None),
            streamed=self._streamed,
            stream_seconds=self._stream_seconds,
            bm25_tokens=self._bm25_tokens,
        )

    def _absorb(self, ctx: BuildContext) -> None:
        """Keep what a build's helpers loaded and counted (the embedder serves the next build too)."""
        self._embedder, self._streamed, self._stream_seconds = ctx.embedder, ctx.streamed, ctx.stream_seconds
        self._bm25_tokens = ctx.bm25_tokens
        if ctx.resumed_embeddings is not None:
            self.resumed_embeddings = ctx.resumed_embeddings

    @tracing.traced("ragsieve.build", after=build_after)  # the build's span, its phases below (docs/tracing.md)
    def build(
        self,
        paths: list[str | Path],
        rebuild: bool = False,
        *,
        sync: bool = False,
        selection: Selection | None = None,
        base_url: str | None = None,
        crawl: dict | None = None,
    ) -> BuildReport:
        """Index `paths`, adding to the index: documents indexed before from other paths stay
        (`docs_kept`). `sync=True` makes the index exactly `paths` (the others are removed);
        `rebuild=True` ignores the previous generation (required to change model)."""
        start = time.perf_counter()
        files = [p for p in paths if not str(p).startswith(("http://", "https://"))]
        base = self._source_root(files, rebuild) if files else None
        load = (
            functools.partial(load_documents, syntax=self.chunker.syntax)
            if self.ray is None
            else functools.partial(self.ray.load, chunker=self.chunker)
        )
        found = gather(
            paths, load, self.root, base=base, progress=self.progress is True, selection=selection, base_url=base_url, crawl=crawl
        )
        docs, loaded, scopes, self.crawl_reports = found.documents, found.loaded, found.scopes, found.crawl_reports
        with IndexLock(self.root, self.lock_wait_s):
            # the documents' own access lists (front matter) beside the chunks, recorded before the new
            # generation goes live so no new chunk is ever served unlabelled (`ragsieve.tools.access.labels`)
            set_front_matter(self.root, {d.source: d.access for d in docs if d.access is not None}, [d.source for d in docs])
            return self._build_locked(docs, loaded, paths, rebuild, start, sync, scopes=scopes)

    def _source_root(self, paths: Sequence[str | Path], rebuild: bool) -> Path | None:
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

    @tracing.traced("ragsieve.build.remove", after=build_after)
    def remove(self, prefixes: list[str]) -> BuildReport:
        """A new generation without the documents whose id is one of `prefixes` or lies below one
        (`examples/docs` removes `examples/docs/...`); nothing is embedded. Unknown prefixes are refused."""
        start = time.perf_counter()
        with IndexLock(self.root, self.lock_wait_s):
            prev_gen = current_generation(self.root)
            if prev_gen is None:
                raise UsageError(f"no index at {self.root} to remove documents from")
            hit = ids_to_remove(prev_gen, prefixes, int(read_manifest(prev_gen)["counts"]["documents"]))
            loaded = LoadResult(documents=[], stats=LoadStats())
            return self._build_locked([], loaded, [], False, start, False, remove=hit)

    def _build_locked(
        self,
        docs: list[Document],
        loaded: LoadResult,
        paths: Sequence[str | Path],
        rebuild: bool,
        start: float,
        sync: bool = False,
        remove: set[str] | None = None,
        scopes: Sequence[str] = (),
    ) -> BuildReport:
        busy_before = self._busy_s()
        prev_gen = None if rebuild else current_generation(self.root)
        prev = read_manifest(prev_gen) if prev_gen is not None and (prev_gen / MANIFEST).is_file() else None
        self.long_code = resolve_long_code(self.long_code, self.provider, prev)
        # an index built before code headers spelled their names in words keeps its text (a new one spells them)
        recorded = None if prev is None else prev["settings"]["chunking"]
        self.header_words = self.symbol_headers and (recorded is None or bool(recorded.get("header_words")))
        self._record_header_words = recorded is None or "header_words" in recorded  # the same settings dict
        ctx = self.context()
        settings = generation_settings(ctx, record_header_words=self._record_header_words)
        why = None if prev is None else mismatch(prev["embedding"], self.provider, self.model, known_dimension(self._embedder))
        if why:
            raise UsageError(
                f"index {self.root}: {why}; refusing to mix two embedding spaces in one index "
                f"(re-embed everything with rebuild=True / --rebuild)"
            )
        reuse = prev is not None and prev["settings"]["chunking"] == settings["chunking"]
        prev_store = ChunkStore(prev_gen / "chunks.sqlite", read_only=True) if reuse and prev_gen else None
        try:
            plan = (
                plan_change(prev_store, prev, docs, scopes, remove)
                if reuse and prev is not None and prev_store is not None and not sync and incremental_applies(ctx, prev, settings)
                else None
            )
            prev_docs: dict[str, str] | None
            kept: list[str]
            if plan is not None:  # O(documents given + in scope): the store's doc_id index, no listing
                prev_docs, unchanged, kept, counts = None, plan.unchanged, [], plan.counts()
            else:  # --sync, changed chunking, the whole-generation layout: the previous documents listed
                prev_docs, unchanged, kept, counts = listed_change(
                    prev_store, docs, scopes, remove, sync, reuse, prev_gen if prev is not None else None
                )
            common = {"index_dir": str(self.root), **load_figures(loaded.stats), **counts}
            if (
                prev is not None
                and prev_gen is not None
                and reuse
                and prev["settings"] == settings
                and len(unchanged) == len(docs)
                and counts["docs_removed"] == 0
                and not remove
            ):
                return BuildReport(
                    generation=prev_gen.name,
                    written=False,
                    chunks_total=prev["counts"]["chunks"],
                    chunks_embedded=0,
                    sparse_rows=prev["sparse"]["rows"],
                    seconds=time.perf_counter() - start,
                    **common,
                )
            gen = new_generation(self.root)
            try:
                hashes = {} if prev_docs is None else {d.doc_id: d.content_hash for d in docs} | {i: prev_docs[i] for i in kept}
                manifest = write_generation(
                    ctx, gen, docs, unchanged, prev_store, prev_gen, settings, hashes, kept, prev_docs=prev_docs, plan=plan
                )
            except BaseException:
                shutil.rmtree(gen, ignore_errors=True)
                raise
        finally:
            self._absorb(ctx)
            if prev_store is not None:
                prev_store.close()
        switch_current(self.root, gen, keep=prev_gen if prev_gen is not None else live_generation(self.root))
        collect_stores(self.root)  # records and stores of the incremental layout no generation sees any more
        if (self.root / "embeddings.sqlite").exists():  # the checkpoint keeps what the live index holds
            keep_live(EmbeddingCache(self.root / "embeddings.sqlite", ctx.cache_model()), ctx.last_keys, ctx.gone_keys)
        return BuildReport(
            generation=gen.name,
            written=True,
            chunks_total=manifest["counts"]["chunks"],
            chunks_embedded=manifest["counts"]["embedded_this_run"],
            embed_seconds=manifest["counts"]["embed_seconds"],
            embed_inputs_cut=manifest["counts"]["inputs_cut"],
            sparse_rows=manifest["sparse"]["rows"],
            seconds=time.perf_counter() - start,
            upgraded=UPGRADED_CELLS if manifest.get("io", {}).get("ivf_cells_added") else "",
            **embed_figures(ctx, manifest["counts"], busy_before),
            **common,
        )

    def _busy_s(self) -> float:
        return self._embedder.busy_s if isinstance(self._embedder, Embedder) else 0.0

    def _cache_model(self) -> str:
        return checkpoint_model(self.model, self.encoder, self.provider, self.long_code)
