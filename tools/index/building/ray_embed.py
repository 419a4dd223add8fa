"""Embedding spread over a Ray cluster: the chunks a build must embed go through a Ray Data pipeline of encoder
actors, and come back into the build's embedding checkpoint.

`IndexBuilder(..., ray=RayEmbedStage(...))` keeps everything else of a build as
it is (loading, chunking, rows, BM25, FAISS, the generation switch, a Milvus
publish): just before the build embeds, the stage sends the texts not yet in
the checkpoint (`embeddings.sqlite`) to Ray — `ray.data.from_items` ->
`map_batches` over an actor pool (`plan_actors`: `actors` encoder actors,
`batch_size` texts per call) — and writes the vectors into
the checkpoint as batches stream back. The build then finds every vector in the
checkpoint, so the index is the one a single-process build writes (same rows and
chunk ids; vectors from the same model and encoder, equal to float precision),
and a killed run resumes from what reached the checkpoint.

An actor that reserves a GPU (`gpus_per_actor`, fractions share one: 0.5 puts
two actors on each GPU; default 1 when the cluster has GPUs and the encoder runs
on one) builds its encoder on that GPU, and reserves the CPUs its tokenizer
needs (`tokenizer_cpus`): the GPU itself waits on tokenization otherwise. With
no count given, the actors and their batch size come from the cluster's
resources: one actor per GPU share and 512 texts a call on GPUs, else one actor
per CPU (one left to the driver) and 64 a call.

Loading and chunking run on Ray too (`load`, `ragsieve.tools.index.building.ray_load`):
the builder takes its documents and their chunks from there. The workers need
ragsieve and the model installed (`pip install 'ragsieve[ray]'` on every node)
and the indexed paths visible (a shared file system). `address="auto"` starts a local Ray instance; any other address is
an existing cluster (`ray://head:10001`, or `auto-cluster` for `ray.init("auto")`).
"""

from __future__ import annotations

import atexit
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.index.building.embed_cache import text_key
from ragsieve.tools.index.building.ray_load import load_and_chunk
from ragsieve.tools.index.embedders.device import GPU_ENCODERS
from ragsieve.tools.index.embedders.local_embedder import Embedder

if TYPE_CHECKING:
    from ragsieve.tools.index.building.embed_cache import EmbeddingCache
    from ragsieve.tools.ingest.chunking import Chunker
    from ragsieve.tools.ingest.loaders import LoadResult
    from ragsieve.tools.ingest.selection import Selection
    from ragsieve.tools.types import Chunk, Document

log = logging.getLogger(__name__)


def import_ray() -> Any:  # the ray module: the optional ray extra, read untyped
    require(Extra.RAY, "ray.data", "indexing on Ray", "on the driver and on every node of the cluster")
    import ray

    return ray


@dataclass(frozen=True)
class ActorPlan:
    """How the encoder actors are placed: how many, texts per call, and what each reserves."""

    actors: int
    batch_size: int
    num_gpus: float
    num_cpus: float

    @property
    def device(self) -> str:
        """Where each actor's encoder runs: the GPU it reserved (Ray makes it the actor's `cuda`), else the CPU."""
        return "cuda" if self.num_gpus > 0 else "cpu"


def plan_actors(
    resources: dict,
    *,
    actors: int | None = None,
    batch_size: int | None = None,
    gpus_per_actor: float | None = None,
    tokenizer_cpus: float = 1.0,
    gpu_encoder: bool = True,
) -> ActorPlan:
    """The actor pool for a cluster offering `resources` (`ray.cluster_resources()`): GPUs go to the actors
    when there are any and the encoder runs on one (`gpu_encoder`), unless `gpus_per_actor` says otherwise."""
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
    share = gpus_per_actor if gpus_per_actor is not None else (1.0 if gpus >= 1 and gpu_encoder else 0.0)
    if share < 0:
        raise UsageError(f"--ray-gpus-per-actor must be >= 0, got {share:g}")
    if share > gpus:
        raise UsageError(f"--ray-gpus-per-actor {share:g}: the Ray cluster offers {gpus:g} GPU(s)")
    if share > 0 and not gpu_encoder:
        raise UsageError(
            "the index's encoder (ONNX Runtime) runs on CPUs only: use --encoder torch-fp16 to encode "
            "on the cluster's GPUs, or --ray-gpus-per-actor 0"
        )
    if share > 0:
        count = actors or max(1, int(gpus / share + 1e-9))
        cpu_each = min(tokenizer_cpus, max(cpus / count, 0.0))  # the tokenizer's share, never more than there is
        return ActorPlan(count, batch_size or 512, share, cpu_each)
    count = actors or max(1, int(cpus) - 1)  # one CPU left to the driver (it writes the checkpoint)
    return ActorPlan(count, batch_size or 64, 0.0, 1.0)


class EncoderActor:
    """One encoder per actor, built once (`make(device=...)`) on the device the actor reserved, embedding a batch
    per call."""

    def __init__(self, make: Callable[..., Embedder], device: str = "cpu") -> None:
        self.embedder = make(device=device)

    def __call__(self, batch: dict) -> dict:
        vectors = np.asarray(self.embedder.embed([str(t) for t in batch["text"]]), dtype=np.float32)
        return {"key": batch["key"], "vector": vectors}


@dataclass
class RayEmbedStage:
    """Where and how to embed on Ray. `make_embedder`: a picklable factory for the encoder each actor builds
    (default: the index's model and encoder, set by the builder)."""

    address: str = "auto"
    actors: int | None = None  # None: from the cluster's resources (`plan_actors`)
    batch_size: int | None = None  # None: 512 on GPUs, 64 on CPUs
    num_cpus: int | None = None  # for a local instance (`auto`); None: all of this machine's
    gpus_per_actor: float | None = None  # None: 1 when the cluster has GPUs (and the encoder runs on one), else 0
    tokenizer_cpus: float = 1.0  # CPUs a GPU actor reserves for its tokenizer
    require_gpus: bool = False  # a GPU device was asked for: a cluster without GPUs is refused
    make_embedder: object = None
    load_parallelism: int | None = None  # blocks for loading / chunking (None: the cluster's CPUs)
    stats: dict = field(default_factory=dict)
    prechunked: dict = field(default_factory=dict)  # doc_id -> chunks cut on Ray by `load`
    load_stats: dict = field(default_factory=dict)
    encoder: str = ""  # set by the builder (`for_model`)
    gpu_encoder: bool = True  # False: the encoder runs on CPUs only (ONNX Runtime), the actors take no GPU
    _started: bool = False

    def __post_init__(self) -> None:
        if self.actors is not None and self.actors < 1:
            raise UsageError(f"ray actors must be >= 1, got {self.actors}")
        if self.batch_size is not None and self.batch_size < 1:
            raise UsageError(f"ray batch size must be >= 1, got {self.batch_size}")
        if self.gpus_per_actor is not None and self.gpus_per_actor < 0:
            raise UsageError(f"--ray-gpus-per-actor must be >= 0, got {self.gpus_per_actor:g}")
        if self.tokenizer_cpus <= 0:
            raise UsageError(f"ray tokenizer CPUs must be > 0, got {self.tokenizer_cpus:g}")
        if not self.address:
            raise UsageError("ray address must not be empty (use auto for a local instance)")

    def wants_gpus(self) -> bool:
        """True when the actors are to encode on GPUs whatever the driver has (asked for by count or device)."""
        return bool(self.gpus_per_actor) or self.require_gpus

    def for_model(self, model: str, encoder: str, batch_size: int) -> "RayEmbedStage":
        self.encoder = encoder
        self.gpu_encoder = encoder in GPU_ENCODERS
        if self.make_embedder is None:
            self.make_embedder = functools.partial(Embedder, model, batch_size=batch_size, encoder=encoder)
        return self

    def plan(self, resources: dict) -> ActorPlan:
        """The actor pool for `resources`; a GPU device asked for on a cluster without GPUs is refused."""
        if self.require_gpus and float(resources.get("GPU", 0)) <= 0 and not self.gpus_per_actor:
            raise UsageError(
                "a GPU device was asked for, but the Ray cluster offers no GPU "
                f"(resources: {resources.get('CPU', 0):g} CPU); use --device cpu"
            )
        return plan_actors(
            resources,
            actors=self.actors,
            batch_size=self.batch_size,
            gpus_per_actor=self.gpus_per_actor,
            tokenizer_cpus=self.tokenizer_cpus,
            gpu_encoder=self.gpu_encoder,
        )

    def load(
        self,
        paths: list[str | Path],
        *,
        chunker: Chunker,
        progress: bool = False,
        selection: Selection | None = None,
        base: Path | None = None,
        base_url: str | None = None,
    ) -> LoadResult:
        """`load_documents` on Ray: the documents of `paths` (a `LoadResult`), their chunks kept in
        `prechunked` for the build (`Chunker` `chunker`, the build's own)."""
        ray = import_ray()
        self._ensure(ray)
        t0 = time.perf_counter()
        parallelism = self.load_parallelism or max(1, int(ray.cluster_resources().get("CPU", 1)))
        try:
            loaded, self.prechunked = load_and_chunk(
                ray, paths, chunker, selection=selection, base=base, base_url=base_url, parallelism=parallelism
            )
        except BaseException:
            self.close()
            raise
        self.load_stats = {
            "documents": len(loaded.documents),
            "prechunked": len(self.prechunked),
            "blocks": parallelism,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        return loaded

    def chunks_of(self, doc: Document, chunker: Chunker) -> list[Chunk]:
        """The chunks `load` cut on Ray for `doc` (cut here when it did not: HTML pages, crawled sites)."""
        found = self.prechunked.get(doc.doc_id)
        return found if found is not None else chunker.run(doc)

    def _ensure(self, ray: Any) -> None:
        if not ray.is_initialized():
            self._init(ray)
            self._started = True
            atexit.register(self.close)

    def close(self) -> None:
        """Stop the Ray instance this stage started (one the caller started stays)."""
        if self._started:
            self._started = False
            import ray

            ray.shutdown()

    def fill(self, cache: EmbeddingCache, texts: list[str], rows: list[int]) -> int:
        """Embed on Ray the texts of `rows` that `cache` lacks, writing each returned batch into `cache`;
        returns how many texts Ray embedded."""
        by_key = {text_key(texts[r]): texts[r] for r in rows}
        have = cache.get_many(sorted(by_key))
        missing = [{"key": k, "text": t} for k, t in by_key.items() if k not in have]
        self.stats = {"texts": len(missing)}
        if not missing:
            self.close()
            return 0
        ray = import_ray()
        self._ensure(ray)
        try:
            t0 = time.perf_counter()
            plan = self.plan(ray.cluster_resources())
            self.stats |= {
                "actors": plan.actors,
                "batch_size": plan.batch_size,
                "gpus_per_actor": plan.num_gpus,
                "cpus_per_actor": plan.num_cpus,
                "device": plan.device,
            }
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False  # the library prints nothing (the CLI reports)
            ds = ray.data.from_items(missing, override_num_blocks=max(1, min(len(missing) // plan.batch_size, 8 * plan.actors)))
            ds = ds.map_batches(
                EncoderActor,
                fn_constructor_kwargs={"make": self.make_embedder, "device": plan.device},
                batch_size=plan.batch_size,
                num_cpus=plan.num_cpus,
                compute=ray.data.ActorPoolStrategy(size=plan.actors),
                num_gpus=plan.num_gpus,
                batch_format="numpy",
            )
            done = 0
            for batch in ds.iter_batches(batch_size=4 * plan.batch_size, batch_format="numpy"):
                cache.put_many([str(k) for k in batch["key"]], np.asarray(batch["vector"], dtype=np.float32))
                done += len(batch["key"])  # checkpointed: a killed run resumes from here
            self.stats.update(embedded=done, seconds=round(time.perf_counter() - t0, 3))
            log.info("ray: %d texts embedded by %d actors on %s in %.1fs", done, plan.actors, plan.device, self.stats["seconds"])
            return done
        finally:
            self.close()

    def _init(self, ray: Any) -> None:
        kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.address == "auto":  # a local instance
            ray.init(num_cpus=self.num_cpus, **kwargs)
        else:
            ray.init(address="auto" if self.address == "auto-cluster" else self.address, **kwargs)
