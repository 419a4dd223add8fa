"""Embedding spread over a Ray cluster: the chunks a build must embed go through a Ray Data pipeline of encoder
actors, and come back into the build's embedding checkpoint.

`IndexBuilder(..., ray=RayEmbedStage(...))` keeps everything else of a build as
it is (loading, chunking, rows, BM25, FAISS, the generation switch, a Milvus
publish): just before the build embeds, the stage sends the texts not yet in
the checkpoint (`embeddings.sqlite`) to Ray — `ray.data.from_items` ->
`map_batches` over an actor pool (`actors` encoder actors, `batch_size` texts
per call, one GPU each when the cluster has GPUs) — and writes the vectors into
the checkpoint as batches stream back. The build then finds every vector in the
checkpoint, so the index is the one a single-process build writes (same rows and
chunk ids; vectors from the same model and encoder, equal to float precision),
and a killed run resumes from what reached the checkpoint.

Loading and chunking run on Ray too (`load`, `ragsieve.tools.index.ray_load`):
the builder takes its documents and their chunks from there. The workers need
ragsieve and the model installed (`pip install 'ragsieve[ray]'` on every node)
and the indexed paths visible (a shared file system). `address="auto"` starts a local Ray instance; any other address is
an existing cluster (`ray://head:10001`, or `auto-cluster` for `ray.init("auto")`).
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require

log = logging.getLogger(__name__)


def import_ray():
    require(Extra.RAY, "ray.data", "indexing on Ray", "on the driver and on every node of the cluster")
    import ray

    return ray


class EncoderActor:
    """One encoder per actor, built once (`make()`), embedding a batch per call."""

    def __init__(self, make) -> None:
        self.embedder = make()

    def __call__(self, batch: dict) -> dict:
        vectors = np.asarray(self.embedder.embed([str(t) for t in batch["text"]]), dtype=np.float32)
        return {"key": batch["key"], "vector": vectors}


@dataclass
class RayEmbedStage:
    """Where and how to embed on Ray. `make_embedder`: a picklable factory for the encoder each actor builds
    (default: the index's model and encoder, set by the builder)."""

    address: str = "auto"
    actors: int = 1
    batch_size: int = 64
    num_cpus: int | None = None  # for a local instance (`auto`); None: all of this machine's
    make_embedder: object = None
    load_parallelism: int | None = None  # blocks for loading / chunking (None: the cluster's CPUs)
    stats: dict = field(default_factory=dict)
    prechunked: dict = field(default_factory=dict)  # doc_id -> chunks cut on Ray by `load`
    load_stats: dict = field(default_factory=dict)
    _started: bool = False

    def __post_init__(self) -> None:
        if self.actors < 1:
            raise UsageError(f"ray actors must be >= 1, got {self.actors}")
        if self.batch_size < 1:
            raise UsageError(f"ray batch size must be >= 1, got {self.batch_size}")
        if not self.address:
            raise UsageError("ray address must not be empty (use auto for a local instance)")

    def for_model(self, model: str, encoder: str, batch_size: int) -> "RayEmbedStage":
        if self.make_embedder is None:
            from ragsieve.tools.index.dense import Embedder

            self.make_embedder = functools.partial(Embedder, model, batch_size=batch_size, encoder=encoder)
        return self

    def load(self, paths, *, chunker, progress: bool = False, selection=None, base=None, base_url=None):
        """`load_documents` on Ray: the documents of `paths` (a `LoadResult`), their chunks kept in
        `prechunked` for the build (`Chunker` `chunker`, the build's own)."""
        from ragsieve.tools.index.ray_load import load_and_chunk

        ray = import_ray()
        self._ensure(ray)
        t0 = time.perf_counter()
        parallelism = self.load_parallelism or max(1, int(ray.cluster_resources().get("CPU", 1)))
        try:
            loaded, self.prechunked = load_and_chunk(ray, paths, chunker, selection=selection, base=base,
                                                     base_url=base_url, parallelism=parallelism)
        except BaseException:
            self.close()
            raise
        self.load_stats = {"documents": len(loaded.documents), "prechunked": len(self.prechunked),
                           "blocks": parallelism, "seconds": round(time.perf_counter() - t0, 3)}
        return loaded

    def chunks_of(self, doc, chunker) -> list:
        """The chunks `load` cut on Ray for `doc` (cut here when it did not: HTML pages, crawled sites)."""
        found = self.prechunked.get(doc.doc_id)
        return found if found is not None else chunker.run(doc)

    def _ensure(self, ray) -> None:
        if not ray.is_initialized():
            import atexit

            self._init(ray)
            self._started = True
            atexit.register(self.close)

    def close(self) -> None:
        """Stop the Ray instance this stage started (one the caller started stays)."""
        if self._started:
            self._started = False
            import ray

            ray.shutdown()

    def fill(self, cache, texts: list[str], rows: list[int]) -> int:
        """Embed on Ray the texts of `rows` that `cache` lacks, writing each returned batch into `cache`;
        returns how many texts Ray embedded."""
        from ragsieve.tools.index.embed_cache import text_key

        by_key = {text_key(texts[r]): texts[r] for r in rows}
        have = cache.get_many(sorted(by_key))
        missing = [{"key": k, "text": t} for k, t in by_key.items() if k not in have]
        self.stats = {"texts": len(missing), "actors": self.actors, "batch_size": self.batch_size}
        if not missing:
            self.close()
            return 0
        ray = import_ray()
        self._ensure(ray)
        try:
            t0 = time.perf_counter()
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False  # the library prints nothing (the CLI reports)
            ds = ray.data.from_items(missing, override_num_blocks=max(1, min(len(missing) // self.batch_size,
                                                                               8 * self.actors)))
            ds = ds.map_batches(EncoderActor, fn_constructor_kwargs={"make": self.make_embedder},
                                batch_size=self.batch_size, num_cpus=0 if gpus else 1,
                                compute=ray.data.ActorPoolStrategy(size=self.actors),
                                num_gpus=gpus, batch_format="numpy")
            done = 0
            for batch in ds.iter_batches(batch_size=4 * self.batch_size, batch_format="numpy"):
                cache.put_many([str(k) for k in batch["key"]], np.asarray(batch["vector"], dtype=np.float32))
                done += len(batch["key"])  # checkpointed: a killed run resumes from here
            self.stats.update(embedded=done, seconds=round(time.perf_counter() - t0, 3), gpus_per_actor=gpus)
            log.info("ray: %d texts embedded by %d actors in %.1fs", done, self.actors, self.stats["seconds"])
            return done
        finally:
            self.close()

    def _init(self, ray) -> None:
        kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.address == "auto":  # a local instance
            ray.init(num_cpus=self.num_cpus, **kwargs)
        else:
            ray.init(address="auto" if self.address == "auto-cluster" else self.address, **kwargs)
