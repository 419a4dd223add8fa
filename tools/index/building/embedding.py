"""Embedding a generation's texts: chunked while the encoder embeds (`embed_stream`), resumed from the
embedding checkpoint (`embed_cache`), or embedded on a Ray cluster first (`ray_embed`)."""

from __future__ import annotations

import numpy as np

from ragsieve.tools import tracing
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.context import BuildContext
from ragsieve.tools.index.building.embed_cache import EmbeddingCache, embed_resumable
from ragsieve.tools.index.building.embed_stream import ChunkEmbedStream
from ragsieve.tools.index.building.layout import Layout
from ragsieve.tools.index.building.progress import progress_reporter, stream_reporter
from ragsieve.tools.index.building.report import indexed_text
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.search.bm25 import tokenize
from ragsieve.tools.types import Chunk, Document


def streams(ctx: BuildContext) -> bool:
    """Whether documents are chunked while the encoder embeds (`ctx.stream`; None: unless a local model runs
    on the CPU, where the encoder already keeps every core busy and the chunking thread only competes with it:
    1200 SciFact abstracts on 2 shared cores took 70.6 s serial and 76.1 s streamed, the same CPU time)."""
    if ctx.stream is not None:
        return bool(ctx.stream)
    if ctx.embedder is not None:
        return not (isinstance(ctx.embedder, Embedder) and not ctx.embedder.placed.gpu)
    return ctx.device is None or ctx.device.gpu


def chunk_while_embedding(ctx: BuildContext, fresh: list[Document], analyse_tokens: bool) -> list:
    """The chunks of `fresh`, cut in a thread while the encoder embeds their texts into the checkpoint
    (`ragsieve.tools.index.building.embed_stream`); `ctx.streamed` counts the texts embedded meanwhile.
    With `analyse_tokens` (the incremental layout), BM25's tokens are made in that thread too."""

    def text(chunk: Chunk) -> str:
        return indexed_text(chunk, ctx.symbol_headers, ctx.header_words) if ctx.index_titles else chunk.text

    proto, memo = ctx.bm25_proto, ctx.bm25_tokens

    def analyse(chunk: Chunk, text: str) -> None:  # BM25's tokens, ready before the encoder is done
        code = chunk.kind == "code"
        memo[(text, code)] = tokenize(text, proto.stem, proto.identifiers, proto.compounds and code)

    cache = EmbeddingCache(ctx.root / "embeddings.sqlite", ctx.cache_model())
    report = stream_reporter(ctx.progress)
    try:
        stream = ChunkEmbedStream(
            ctx.chunker.run,
            text,
            lambda batch: ctx.embedder_for().embed(batch),
            cache,
            ctx.step(),
            report,
            analyse if analyse_tokens else None,
        )
        chunked = stream.run(fresh)
    finally:
        cache.close()
        report(None, None)
    ctx.streamed = stream.stats.embedded
    return chunked


@tracing.traced("ragsieve.build.embed")  # a build phase's span (docs/tracing.md)
def embed_vectors(
    ctx: BuildContext,
    layout: Layout,
    texts: list[str],
    to_embed: list[int],
    prev_vectors: np.ndarray | None,
    headers: list[int | None],
) -> np.ndarray:
    """The generation's vectors in row order: kept rows copied from `prev_vectors`, the rest embedded
    (on Ray first where the build has a cluster) into the checkpoint and read back from it."""
    dim = prev_vectors.shape[1] if prev_vectors is not None else None
    if to_embed:
        dim = ctx.embedder_for().dimension
        if prev_vectors is not None and layout.n_base and prev_vectors.shape[1] != dim:
            raise UsageError(
                f"index {ctx.root} holds {prev_vectors.shape[1]}-d vectors; {ctx.model!r} gives "
                f"{dim}-d vectors (re-embed everything with rebuild=True / --rebuild)"
            )
    if dim is None:
        raise UsageError(f"index {ctx.root}: nothing to embed and no previous vectors")
    n = layout.n
    vectors = np.zeros((n, dim), dtype=np.float32)
    if prev_vectors is not None:
        stay = min(n, layout.n_base)
        vectors[:stay] = prev_vectors[:stay]  # unchanged rows stay where they were
        if layout.moved:
            old, new = zip(*sorted(layout.moved.items()))
            vectors[list(new)] = prev_vectors[list(old)]
    if to_embed:
        cache = EmbeddingCache(ctx.root / "embeddings.sqlite", ctx.cache_model(), dim)
        try:
            embed, local = ctx.document_embed([texts[r] for r in to_embed], [headers[r] for r in to_embed])
            if ctx.ray is not None and ctx.provider != "sentence-transformers":
                raise UsageError(
                    f"--ray runs the local encoder on the cluster; the {ctx.provider!r} embedding "
                    "provider is an endpoint already: index without --ray"
                )
            if ctx.ray is not None:  # embedded on a Ray cluster into the checkpoint first
                ctx.ray.for_model(ctx.model, ctx.encoder, ctx.batch_size).fill(
                    cache, texts, [r for i, r in enumerate(to_embed) if i not in local]
                )  # windowed ones: here
            ctx.resumed_embeddings = (
                embed_resumable(
                    cache, texts, to_embed, vectors, embed, ctx.step(), lambda total: progress_reporter(ctx.progress, total)
                )
                - ctx.streamed
            )
        finally:
            cache.close()
    return vectors
