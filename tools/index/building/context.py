"""What one build's helpers read and leave behind: the builder's settings at the start of the build, its
encoder, and the figures the writers record for the report.

`IndexBuilder.context()` makes one per build; the helpers (`embedding`, `generation_writer`, `incremental`,
`report`) take it and never the builder, so they depend on this module alone and the builder on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ragsieve.tools.index.building.embed_cache import cache_model, step_factor
from ragsieve.tools.index.building.progress import Progress
from ragsieve.tools.index.building.windows import LongCode, embed_windowed, tokenizer_of, window_texts
from ragsieve.tools.index.embedders import embedding_record
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.local.generations import MANIFEST, read_manifest
from ragsieve.tools.index.search.bm25 import BM25Index
from ragsieve.tools.index.search.dense import DenseIndex
from ragsieve.tools.ingest.chunking import Chunker


@dataclass
class BuildContext:
    """The settings a build runs with (`IndexBuilder`'s, documented there), the embedder (loaded on first use,
    kept by the builder across builds), and what the writers record while they work: the texts embedded while
    chunking (`streamed`, in `stream_seconds`), the stream's BM25 tokens, the embedding checkpoint's keys to keep
    (`last_keys`; None in the incremental layout, which forgets `gone_keys` instead) and `resumed_embeddings`."""

    root: Path
    chunker: Chunker
    model: str
    provider: str
    encoder: str
    device: Any  # `ragsieve.tools.index.embedders.device.Device`, or None before one is chosen
    batch_size: int
    progress: Progress
    bm25_proto: BM25Index
    dense_proto: DenseIndex
    sparse_percentile: float
    index_titles: bool
    symbol_headers: bool
    header_words: bool
    long_code: LongCode | None
    ray: Any = None  # a `ragsieve.tools.index.building.ray_embed.RayEmbedStage`
    overlap: bool = True
    stream: bool | None = None
    stream_min_docs: int = 256
    segments: bool = True
    embedder: Any = None  # an `Embedder` or any provider of `ragsieve.tools.index.embedders`
    new_root: Path | None = None  # the source root this build chose (an index's first build)
    streamed: int = 0
    stream_seconds: float = 0.0
    bm25_tokens: dict[tuple[str, bool], list[str]] = field(default_factory=dict)
    last_keys: set[str] | None = field(default_factory=set)
    gone_keys: set[str] = field(default_factory=set)
    resumed_embeddings: int | None = None

    def embedder_for(self) -> Any:
        """The embedder, the local model loaded on first use."""
        if self.embedder is None:
            self.embedder = Embedder(
                self.model, batch_size=self.batch_size, encoder=self.encoder, device=str(self.device or "cpu")
            )
        return self.embedder

    def document_embed(self, texts: list[str], headers: list[int | None]) -> tuple[Callable, set[int]]:
        """(embed function for a batch of `texts`, the rows of `texts` that must not go to Ray as they are):
        with `long_code` `windows`, a code chunk (header length given) longer than the local encoder's window
        is embedded as the mean of its windows (`windows.py`). An embedder with no known window (a
        provider reading whole texts) has nothing to cut."""
        embedder = self.embedder_for()
        tok = tokenizer_of(embedder) if self.long_code is LongCode.WINDOWS else None
        if tok is None or all(h is None for h in headers):
            return embedder.embed, set()
        by_text = dict(zip(texts, headers))
        local = (
            {i for i, (t, h) in enumerate(zip(texts, headers)) if h is not None and len(window_texts(tok[0], t, h, tok[1])) > 1}
            if self.ray is not None
            else set()
        )
        tokenizer, window = tok
        return (lambda batch: embed_windowed(embedder.embed, tokenizer, window, batch, [by_text.get(t) for t in batch])), local

    def cache_model(self) -> str:
        """The embedding checkpoint's key for this encoder (`embed_cache.cache_model`)."""
        return checkpoint_model(self.model, self.encoder, self.provider, self.long_code)

    def step(self) -> int:
        """Texts per checkpointed embedding step: four batches, times `embed_cache.step_factor` (before the model
        is loaded, a GPU device says it)."""
        if self.embedder is None:
            return self.batch_size * 4 * (4 if self.device is not None and self.device.gpu else 1)
        return self.batch_size * 4 * step_factor(self.embedder)

    def embedding_section(self, dimension: int, prev_gen: Path | None) -> dict:
        """The manifest's record of the provider (carried over from the previous generation when nothing was
        embedded this time)."""
        if self.embedder is not None:
            return embedding_record(self.embedder, dimension)
        prev = read_manifest(prev_gen)["embedding"] if prev_gen is not None and (prev_gen / MANIFEST).is_file() else {}
        return prev | {
            "provider": prev.get("provider", self.provider),
            "model": self.model,
            "dimension": dimension,
            "encoder": self.encoder,
        }

    def recorded_root(self, prev_gen: Path | None) -> Path | None:
        """The source root the index records: the previous generation's, else the one this build chose."""
        if prev_gen is not None and (prev_gen / MANIFEST).is_file():
            recorded = read_manifest(prev_gen).get("source_root")
            return Path(recorded) if recorded else None
        return self.new_root


def checkpoint_model(model: str, encoder: str, provider: str, long_code: LongCode | None) -> str:
    """The embedding checkpoint's key: the model and encoder (long code chunks' vectors differ with windows),
    or the provider and model of an endpoint."""
    windows = "+windows" if long_code is LongCode.WINDOWS else ""
    return cache_model(model, encoder) + windows if provider == "sentence-transformers" else f"{provider}:{model}"
