"""Ray on GPUs (issue 47), with the Ray boundary faked (no cluster, no GPU): the actor pool asked for from the
cluster's resources (GPUs per actor, fractions, the tokenizer's CPUs, actor count and batch size), refusals that
say why, and an actor whose encoder is built on the device it reserved, its vectors reaching the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building import ray_embed
from ragsieve.tools.index.building.embed_cache import EmbeddingCache, text_key
from ragsieve.tools.index.building.ray_embed import EncoderActor, RayEmbedStage, plan_actors


@pytest.mark.parametrize(
    "resources, kwargs, expected",
    [
        ({"CPU": 16, "GPU": 4}, {}, (4, 512, 1.0, 1.0, "cuda")),
        ({"CPU": 16, "GPU": 4}, {"gpus_per_actor": 0.5}, (8, 512, 0.5, 1.0, "cuda")),
        ({"CPU": 4, "GPU": 2}, {"gpus_per_actor": 0.25, "tokenizer_cpus": 2.0}, (8, 512, 0.25, 0.5, "cuda")),
        ({"CPU": 16, "GPU": 4}, {"actors": 2, "batch_size": 1024}, (2, 1024, 1.0, 1.0, "cuda")),
        ({"CPU": 8}, {}, (7, 64, 0.0, 1.0, "cpu")),
        ({"CPU": 2}, {}, (1, 64, 0.0, 1.0, "cpu")),
        ({"CPU": 16, "GPU": 4}, {"gpu_encoder": False}, (15, 64, 0.0, 1.0, "cpu")),  # ONNX: the GPUs stay free
        ({"CPU": 16, "GPU": 4}, {"gpus_per_actor": 0.0}, (15, 64, 0.0, 1.0, "cpu")),
    ],
)
def test_the_actor_pool_comes_from_the_cluster_resources(resources, kwargs, expected):
    plan = plan_actors(resources, **kwargs)
    assert (plan.actors, plan.batch_size, plan.num_gpus, plan.num_cpus, plan.device) == expected


def test_impossible_requests_are_refused_with_the_reason():
    with pytest.raises(UsageError, match="offers 1 GPU"):
        plan_actors({"CPU": 8, "GPU": 1}, gpus_per_actor=2)
    with pytest.raises(UsageError, match="runs on CPUs only"):
        plan_actors({"CPU": 8, "GPU": 1}, gpus_per_actor=1, gpu_encoder=False)
    with pytest.raises(UsageError, match="offers no GPU"):
        RayEmbedStage(require_gpus=True).plan({"CPU": 8})
    with pytest.raises(UsageError, match=">= 0"):
        RayEmbedStage(gpus_per_actor=-1)


@dataclass
class FakeEncoder:
    device: str
    name: str = "fake"
    encoder: str = "torch-fp16"
    dimension: int = 4

    def embed(self, texts, progress=False):
        return np.asarray([[len(t), 1.0, 0.0, float(self.device == "cuda")] for t in texts], dtype=np.float32)


@dataclass
class FakeDataset:
    """`from_items` -> `map_batches` (records what was asked; runs the actors in-process) -> `iter_batches`."""

    ray: "FakeRay"
    items: list

    def map_batches(self, fn, *, fn_constructor_kwargs, batch_size, num_cpus, compute, num_gpus, batch_format):
        self.ray.asked = {
            "batch_size": batch_size,
            "num_cpus": num_cpus,
            "num_gpus": num_gpus,
            "actors": compute["size"],
            "batch_format": batch_format,
        }
        actor = fn(**fn_constructor_kwargs)
        self.ray.actors.append(actor)
        out = []
        for s in range(0, len(self.items), batch_size):
            part = self.items[s : s + batch_size]
            out.append(actor({"key": np.asarray([i["key"] for i in part]), "text": np.asarray([i["text"] for i in part])}))
        return FakeDataset(self.ray, out)

    def iter_batches(self, batch_size, batch_format):
        yield from self.items


@dataclass
class FakeRay:
    resources: dict
    asked: dict = field(default_factory=dict)
    actors: list = field(default_factory=list)

    def __post_init__(self):
        ray = self

        class Data:
            class DataContext:
                enable_progress_bars = True

                @classmethod
                def get_current(cls):
                    return cls

            @staticmethod
            def from_items(items, override_num_blocks):
                return FakeDataset(ray, list(items))

            @staticmethod
            def ActorPoolStrategy(size):
                return {"size": size}

        self.data = Data

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return dict(self.resources)


def test_an_actor_that_reserves_a_gpu_builds_its_encoder_there(tmp_path, monkeypatch):
    fake = FakeRay({"CPU": 8, "GPU": 2})
    monkeypatch.setattr(ray_embed, "import_ray", lambda: fake)
    stage = RayEmbedStage(gpus_per_actor=0.5, make_embedder=FakeEncoder).for_model("m", "torch-fp16", 64)
    cache = EmbeddingCache(tmp_path / "e.sqlite", "m#fp16")
    texts = [f"text {i}" * (i + 1) for i in range(10)]
    try:
        assert stage.fill(cache, texts, list(range(10))) == 10
        got = cache.get_many([text_key(t) for t in texts])
    finally:
        cache.close()
    assert fake.asked == {"batch_size": 512, "num_cpus": 1.0, "num_gpus": 0.5, "actors": 4, "batch_format": "numpy"}
    assert [a.embedder.device for a in fake.actors] == ["cuda"]  # built on the GPU it reserved
    assert all(got[text_key(t)][3] == 1.0 and got[text_key(t)][0] == len(t) for t in texts)
    assert stage.stats["device"] == "cuda" and stage.stats["gpus_per_actor"] == 0.5


def test_on_a_cpu_cluster_the_actors_encode_on_cpus_and_an_onnx_index_leaves_gpus_alone(tmp_path, monkeypatch):
    for resources, encoder in (({"CPU": 4}, "torch"), ({"CPU": 4, "GPU": 1}, "onnx-int8")):
        fake = FakeRay(resources)
        monkeypatch.setattr(ray_embed, "import_ray", lambda fake=fake: fake)
        stage = RayEmbedStage(make_embedder=FakeEncoder).for_model("m", encoder, 64)
        cache = EmbeddingCache(tmp_path / f"{encoder}.sqlite", "m")
        try:
            stage.fill(cache, ["a", "b"], [0, 1])
        finally:
            cache.close()
        assert fake.asked["num_gpus"] == 0.0 and fake.asked["num_cpus"] == 1.0 and fake.asked["actors"] == 3
        assert fake.actors[0].embedder.device == "cpu"


def test_the_encoder_actor_passes_its_device_to_the_factory():
    made: list[str] = []

    def make(device: str):
        made.append(device)
        return FakeEncoder(device)

    actor = EncoderActor(make, device="cuda")
    out = actor({"key": np.asarray(["k"]), "text": np.asarray(["hello"])})
    assert made == ["cuda"] and out["vector"].shape == (1, 4) and list(out["key"]) == ["k"]


def test_a_builder_whose_ray_actors_take_gpus_defaults_to_torch_fp16(tmp_path):
    from ragsieve.tools.index.building.builder import IndexBuilder

    builder = IndexBuilder(tmp_path / "idx", progress=False, ray=RayEmbedStage(gpus_per_actor=1))
    assert builder.encoder == "torch-fp16"  # the driver needs no GPU of its own


def test_ray_options_without_ray_are_refused():
    from ragsieve.cli.main import build_parser

    args = build_parser().parse_args(["index", "x", "--index", "y", "--ray-gpus-per-actor", "0.5"])
    from ragsieve.cli.embedders import ray_stage

    with pytest.raises(UsageError, match="apply with --ray only"):
        ray_stage(args)
