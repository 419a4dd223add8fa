"""Chunking while the encoder embeds: a producer thread cuts documents into chunks (and tokenizes them for BM25)
and hands their texts over in windows (a bounded queue); the calling thread embeds each window into the embedding
checkpoint.

On a GPU the encoder outruns one core's chunking (SciFact: about 0.3 s of
chunking per 1,000 abstracts, 2,400 chunks/s on an H100, issue 47), and the
model loads while the first documents are cut. Within a window, texts go to the
encoder longest first (`length_order`: batches of similar length carry less
padding) and their vectors come back to the texts' order before they are
checkpointed. The build then finds every vector in the checkpoint (`embed_cache`),
so the index is the one the serial path writes: same rows and chunk ids, and
vectors equal to float precision for an encoder whose vectors do not depend on
batch composition (torch, onnx). `onnx-int8` quantises activations per batch:
its vectors move with the batch a text lands in (minimum cosine 0.993 between
two batchings of the same SciFact abstracts), in this path as in the serial one.

Code chunks are left to the serial pass (a long one is embedded as the mean of
its windows, `windows.py`). Below `stream_min_docs` fresh documents chunking is
instant and the serial path is used; so it is for a local model on the CPU
(`embedding.streams`), which keeps the cores busy by itself.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ragsieve.tools.index.building.embed_cache import EmbeddingCache, text_key
from ragsieve.tools.types import Chunk, Document

QUEUE_WINDOWS = 2  # windows of texts waiting for the encoder at most
_END = None


def length_order(texts: Sequence[str]) -> np.ndarray:
    """Positions of `texts` longest first (stable): the order the encoder sees them in."""
    return np.argsort([-len(t) for t in texts], kind="stable")


def embed_in_length_order(embed: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """`embed` over `texts` sorted longest first; the rows come back in the order of `texts`."""
    order = length_order(texts)
    vectors = np.asarray(embed([texts[i] for i in order]), dtype=np.float32)
    out = np.empty_like(vectors)
    out[order] = vectors
    return out


@dataclass
class StreamStats:
    """What the stream did: texts embedded, found in the checkpoint, windows, seconds, chunks seen."""

    embedded: int = 0
    from_cache: int = 0
    windows: int = 0
    seconds: float = 0.0
    chunks: int = 0


class ChunkEmbedStream:
    """`run(docs)` -> the documents' chunks (in document order), their texts embedded into `cache` meanwhile.

    `chunk(doc)` cuts a document, `text(chunk)` is what the encoder reads, `embed(texts)` the encoder,
    `window` texts per checkpointed step, `report(done, seen)` the progress (chunks embedded, chunks seen)."""

    def __init__(
        self,
        chunk: Callable[[Document], list[Chunk]],
        text: Callable[[Chunk], str],
        embed: Callable[[list[str]], np.ndarray],
        cache: EmbeddingCache,
        window: int,
        report: Callable[[int, int], None] | None = None,
        analyse: Callable[[Chunk, str], None] | None = None,
    ) -> None:
        self.chunk, self.text, self.embed, self.cache = chunk, text, embed, cache
        self.analyse = analyse  # more work per chunk in the producer (the BM25 tokens), while the encoder runs
        self.window = max(1, int(window))
        self.report = report or (lambda done, seen: None)
        self.stats = StreamStats()

    def run(self, docs: Iterable[Document]) -> list[tuple[Document, list[Chunk]]]:
        texts: queue.Queue[list[str] | None] = queue.Queue(maxsize=QUEUE_WINDOWS)
        chunked: list[tuple[Document, list[Chunk]]] = []
        stop, failed = threading.Event(), []
        seen = [0]

        def put(item: list[str] | None) -> bool:
            while not stop.is_set():
                try:
                    texts.put(item, timeout=0.2)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            pending: list[str] = []
            try:
                for doc in docs:
                    if stop.is_set():
                        return
                    chunks = self.chunk(doc)
                    chunked.append((doc, chunks))
                    for c in chunks:
                        text = self.text(c)
                        if self.analyse is not None:
                            self.analyse(c, text)
                        if c.kind != "code":
                            pending.append(text)
                    seen[0] += len(chunks)
                    while len(pending) >= self.window:
                        if not put(pending[: self.window]):
                            return
                        pending = pending[self.window :]
                if pending:
                    put(pending)
            except BaseException as exc:  # handed to the caller's thread, raised there
                failed.append(exc)
            finally:
                put(_END)

        t0 = time.perf_counter()
        producer = threading.Thread(target=produce, name="ragsieve-chunker", daemon=True)
        producer.start()
        try:
            while (window := texts.get()) is not _END:
                self._embed_window(window)
                self.report(self.stats.embedded + self.stats.from_cache, seen[0])
        finally:
            stop.set()
            producer.join()
            self.stats.seconds = time.perf_counter() - t0
            self.stats.chunks = seen[0]
        if failed:
            raise failed[0]
        return chunked

    def _embed_window(self, window: list[str]) -> None:
        unique = list(dict.fromkeys(window))
        keys = [text_key(t) for t in unique]
        have = self.cache.get_many(sorted(set(keys)))
        missing = [(k, t) for k, t in zip(keys, unique) if k not in have]
        self.stats.from_cache += len(unique) - len(missing)
        self.stats.windows += 1
        if missing:
            vectors = embed_in_length_order(self.embed, [t for _, t in missing])
            self.cache.put_many([k for k, _ in missing], vectors)  # the checkpoint: a killed build resumes here
            self.stats.embedded += len(missing)
