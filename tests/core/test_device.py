"""Device choice (issue 47): `auto` with and without a visible GPU (faked at the torch boundary), a refused GPU in
one line, the encoder that follows the device, an fp16 index queried on a CPU-only machine, the torch encoder's
vectors equal to `SentenceTransformer.encode`, and the device in the reranker's and the retrieve step's trace."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from ragsieve.agent.config import Config, IndexConfig, RerankConfig
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.embedders import device as device_mod
from ragsieve.tools.index.embedders.device import (
    Device,
    DeviceKind,
    default_encoder_for,
    place_encoder,
    placement_note,
    resolve_device,
)


@dataclass
class FakeAccelerators:
    """What torch would report: `cuda` GPUs and whether MPS is there; counts how often it was asked."""

    cuda: int = 0
    mps: bool = False
    asked: int = 0

    def cuda_count(self) -> int:
        self.asked += 1
        return self.cuda

    def mps_available(self) -> bool:
        self.asked += 1
        return self.mps


def test_auto_picks_a_visible_gpu_else_the_cpu():
    assert str(resolve_device("auto", FakeAccelerators(cuda=2))) == "cuda:0"
    assert resolve_device("auto", FakeAccelerators(cuda=2)).gpu
    assert str(resolve_device("auto", FakeAccelerators(mps=True))) == "mps"
    cpu = resolve_device("auto", FakeAccelerators())
    assert cpu.kind is DeviceKind.CPU and not cpu.gpu and not cpu.explicit
    assert str(resolve_device("cuda:1", FakeAccelerators(cuda=2))) == "cuda:1"
    probe = FakeAccelerators(cuda=1)
    assert str(resolve_device("CPU", probe)) == "cpu" and probe.asked == 0  # the CPU needs no probe


@pytest.mark.parametrize(
    "spec, probe, words",
    [
        ("cuda", FakeAccelerators(), "torch sees no CUDA GPU"),
        ("cuda:2", FakeAccelerators(cuda=2), "cuda:0..cuda:1"),
        ("mps", FakeAccelerators(cuda=1), "no Apple GPU"),
        ("gpu", FakeAccelerators(cuda=1), "choose auto, cpu, cuda, cuda:N or mps"),
        ("mps:1", FakeAccelerators(mps=True), "choose auto, cpu, cuda, cuda:N or mps"),
    ],
)
def test_a_device_that_is_not_there_is_refused_in_one_line(spec, probe, words):
    with pytest.raises(UsageError) as err:
        resolve_device(spec, probe)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_encoder_follows_the_device():
    gpu, cpu = Device(DeviceKind.CUDA, 0, requested="auto"), Device(DeviceKind.CPU, requested="auto")
    assert default_encoder_for(gpu) == "torch-fp16"
    assert default_encoder_for(cpu) == "onnx-int8"
    assert place_encoder("torch-fp16", gpu) == gpu
    assert str(place_encoder("onnx-int8", gpu)) == "cpu"  # auto: an ONNX index stays on the CPU
    with pytest.raises(UsageError, match="runs on the CPU only"):
        place_encoder("onnx-int8", Device(DeviceKind.CUDA, 0, requested="cuda"))
    assert "within tolerance" in placement_note("torch-fp16", cpu) and "fp32" in placement_note("torch-fp16", cpu)
    assert placement_note("torch-fp16", gpu) == "torch-fp16 on cuda:0"


def test_the_builder_on_a_gpu_machine_picks_torch_fp16_and_larger_batches(tmp_path, monkeypatch):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.building.settings import generation_settings, resolve_long_code

    monkeypatch.setattr(device_mod.TorchAccelerators, "cuda_count", lambda self: 1)
    builder = IndexBuilder(tmp_path / "idx", progress=False)  # device auto: nothing is loaded yet
    assert builder.encoder == "torch-fp16" and str(builder.device) == "cuda:0" and builder.batch_size == 512
    builder.long_code = resolve_long_code(builder.long_code, builder.provider, None)  # what a build does first
    assert generation_settings(builder.context())["chunking"]["precision"] == "fp16"
    assert builder._cache_model() == "sentence-transformers/all-MiniLM-L6-v2#fp16+windows"
    cpu = IndexBuilder(tmp_path / "cpu", progress=False, device="cpu")
    assert cpu.encoder == "onnx-int8" and str(cpu.device) == "cpu" and cpu.batch_size == 64
    with pytest.raises(UsageError, match="runs on a GPU and there is none here"):
        IndexBuilder(tmp_path / "x", progress=False, device="cpu", encoder="torch-fp16")
    with pytest.raises(UsageError, match="runs on the CPU only"):
        IndexBuilder(tmp_path / "y", progress=False, device="cuda", encoder="onnx-int8")


def test_without_a_gpu_auto_keeps_the_cpu_default(tmp_path, monkeypatch):
    from ragsieve.tools.index.building.builder import IndexBuilder

    monkeypatch.setattr(device_mod.TorchAccelerators, "cuda_count", lambda self: 0)
    monkeypatch.setattr(device_mod.TorchAccelerators, "mps_available", lambda self: False)
    builder = IndexBuilder(tmp_path / "idx", progress=False)
    assert builder.encoder == "onnx-int8" and str(builder.device) == "cpu"
    with pytest.raises(UsageError, match="torch sees no CUDA GPU"):
        IndexBuilder(tmp_path / "idx", progress=False, device="cuda")


def test_config_checks_the_device_and_gives_it_to_the_reranker():
    assert IndexConfig(device="CUDA:1").device == "cuda:1"
    with pytest.raises(UsageError, match="invalid device"):
        IndexConfig(device="tpu")
    assert Config.model_validate({"index": {"device": "cpu"}}).index.device == "cpu"
    ce = RerankConfig(provider="cross-encoder", model="/x")
    assert ce.options("cuda:0")["device"] == "cuda:0"  # the [index] device by default
    assert RerankConfig(provider="cross-encoder", model="/x", device="cpu").options("cuda:0")["device"] == "cpu"
    with pytest.raises(UsageError, match='applies to provider "cross-encoder"'):
        RerankConfig(provider="flashrank", device="cuda").options()


def test_a_cuda_request_on_this_machine_is_one_clear_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    (tmp_path / "a.md").write_text("# A\n\nsome text\n", encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for args in (
        ["index", str(tmp_path / "a.md"), "--index", str(tmp_path / "idx"), "--device", "cuda"],
        ["eval", str(tmp_path), "--index", str(tmp_path / "idx"), "--device", "cuda:0", "--retrieval-only"],
    ):
        out = subprocess.run([sys.executable, "-m", "ragsieve", *args], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "torch sees no CUDA GPU" in lines[0] and "Traceback" not in out.stderr
    assert not (tmp_path / "idx").exists()  # nothing was written


def test_the_torch_encoder_equals_sentence_transformers_encode():
    from ragsieve.tools.index.embedders.local_embedder import Embedder

    texts = ["short", "a somewhat longer sentence about proteins and cells", "  padded text  ", "word " * 400, "another one", "x"]
    embedder = Embedder(encoder="torch", batch_size=2)  # batches of 2, tokenized ahead by a pool of threads
    ours = embedder.embed(texts)
    ref = embedder._model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    assert ours.shape == ref.shape and np.abs(ours - ref).max() < 1e-5
    assert embedder.busy_s > 0 and embedder.device == "cpu" and embedder.precision == "fp32"


def test_an_fp16_index_is_queried_on_a_cpu_only_machine_in_fp32(tmp_path, monkeypatch):
    from ragsieve.tools.index.embedders import open_embedder

    monkeypatch.setattr(device_mod.TorchAccelerators, "cuda_count", lambda self: 0)
    monkeypatch.setattr(device_mod.TorchAccelerators, "mps_available", lambda self: False)
    record = {
        "provider": "sentence-transformers",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "dimension": 384,
        "encoder": "torch-fp16",
        "device": "cuda:0",
    }
    embedder = open_embedder(record)
    assert embedder.device == "cpu" and embedder.precision == "fp32" and "within tolerance" in embedder.placement
    vector = embedder.embed(["a question about cells"])
    assert vector.shape == (1, 384) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_the_trace_says_where_queries_and_reranking_ran(tmp_path):
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.building.builder import IndexBuilder

    (tmp_path / "docs").mkdir()
    for i in range(3):
        (tmp_path / "docs" / f"d{i}.md").write_text(f"# Doc {i}\n\nCells divide by mitosis {i}.\n", encoding="utf-8")
    report = IndexBuilder(tmp_path / "idx", progress=False, device="cpu", encoder="torch").build([tmp_path / "docs"])
    assert "embedded by torch on cpu" in report.summary() and report.device == "torch on cpu"
    assert report.encoder_busy is not None and 0 < report.encoder_busy <= 1 and report.embed_rate > 0
    config = Config.model_validate({"index": {"device": "cpu"}})
    with Orchestrator.open(tmp_path / "idx", config) as orch:
        orch.retrieve("how do cells divide")
        assert orch.index.embedding_placement() == "torch on cpu"
