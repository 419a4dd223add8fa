"""Which device embeds and reranks: `auto`, `cpu`, `cuda[:N]` or `mps`, resolved against what torch sees.

`auto` picks a GPU when torch sees one (CUDA first, then Apple's MPS), else the
CPU. A GPU asked for by name on a machine without one is refused with one line
(`UsageError`), never a traceback from deep inside torch. What torch sees is
read through `Accelerators`, a two-method seam that tests replace with a fake.

The encoder follows the device (`encoder_for`): on a GPU `torch-fp16` (the
sentence-transformers model in half precision: dense SciFact nDCG@10 0.6451 ->
0.6449, minimum cosine to fp32 0.9996, issue 47); on the CPU `onnx-int8` stays
the default. An index keeps the encoder it records: one embedded with the
CPU-only ONNX variants stays on the CPU under `auto` (said in the build
summary) and is refused under an explicit GPU; one embedded with `torch-fp16`
is queried (or extended) on a CPU-only machine in fp32, within that tolerance
(`placement_note`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Protocol

from ragsieve.tools.errors import UsageError
from ragsieve.tools.modes import DeviceKind, parse_spec

log = logging.getLogger(__name__)

FP16_TOLERANCE = "minimum cosine 0.9996 between fp16 and fp32 vectors, SciFact nDCG@10 0.6451 vs 0.6449 (issue 47)"
GPU_ENCODERS = ("torch", "torch-fp16")  # the ONNX variants run on ONNX Runtime's CPU provider only


class Accelerators(Protocol):
    """What the machine offers, as torch sees it."""

    def cuda_count(self) -> int: ...

    def mps_available(self) -> bool: ...


class TorchAccelerators:
    """The real probe: torch's own answers (no torch installed: no GPU)."""

    def cuda_count(self) -> int:
        try:
            import torch
        except ImportError:
            return 0
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0

    def mps_available(self) -> bool:
        try:
            import torch
        except ImportError:
            return False
        backend = getattr(torch.backends, "mps", None)
        return bool(backend is not None and backend.is_available())


@dataclass(frozen=True)
class Device:
    """A resolved device (never `auto`): `cpu`, `cuda:N` or `mps`; `requested` is what the user asked for."""

    kind: DeviceKind
    index: int | None = None
    requested: str = "auto"

    def __str__(self) -> str:
        return f"cuda:{self.index or 0}" if self.kind is DeviceKind.CUDA else self.kind.value

    @property
    def gpu(self) -> bool:
        return self.kind in (DeviceKind.CUDA, DeviceKind.MPS)

    @property
    def explicit(self) -> bool:
        """True when the user named this device (not picked by `auto`)."""
        return self.requested != DeviceKind.AUTO.value


CPU = Device(DeviceKind.CPU, requested="cpu")


def resolve_device(spec: str = "auto", probe: Accelerators | None = None) -> Device:
    """The device `spec` names on this machine; a GPU that torch does not see is refused in one line."""
    kind, number, text = parse_spec(spec)
    probe = probe or TorchAccelerators()
    if kind is DeviceKind.CPU:
        return Device(DeviceKind.CPU, requested=text)
    if kind is DeviceKind.AUTO:
        if probe.cuda_count() > 0:
            return Device(DeviceKind.CUDA, 0, requested=text)
        return Device(DeviceKind.MPS, requested=text) if probe.mps_available() else Device(DeviceKind.CPU, requested=text)
    if kind is DeviceKind.MPS:
        if not probe.mps_available():
            raise UsageError(
                "device 'mps' asked for, but torch sees no Apple GPU here "
                "(torch.backends.mps.is_available() is False); use --device cpu or auto"
            )
        return Device(DeviceKind.MPS, requested=text)
    count, index = probe.cuda_count(), int(number or 0)
    if count == 0:
        raise UsageError(
            f"device {text!r} asked for, but torch sees no CUDA GPU on this machine "
            "(torch.cuda.is_available() is False); use --device cpu or auto"
        )
    if index >= count:
        raise UsageError(f"device {text!r} asked for, but torch sees {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})")
    return Device(DeviceKind.CUDA, index, requested=text)


def default_encoder_for(device: Device) -> str:
    """The encoder of a new index on `device`: `torch-fp16` on a GPU, else the CPU default (`onnx-int8`)."""
    if device.gpu:
        return "torch-fp16"
    return default_encoder()


def place_encoder(encoder: str, device: Device) -> Device:
    """Where `encoder` runs when `device` was asked for: an ONNX variant on a GPU picked by `auto` goes to the
    CPU (ONNX Runtime's CPU provider is the only one used); asked for by name, that is refused."""
    if not device.gpu or encoder in GPU_ENCODERS:
        return device
    if device.explicit:
        raise UsageError(
            f"encoder {encoder!r} runs on the CPU only (ONNX Runtime); on {device} use --encoder "
            "torch-fp16 (a new index, or --rebuild) or --device cpu"
        )
    return Device(DeviceKind.CPU, requested=device.requested)


def placement_note(encoder: str, device: Device) -> str:
    """What runs where, for build summaries and traces: e.g. `torch-fp16 on cuda:0`; a `torch-fp16` index on
    the CPU says that its vectors are computed in fp32 there, within the measured tolerance."""
    if encoder == "torch-fp16" and not device.gpu:
        return f"torch-fp16 index embedded in fp32 on {device} (within tolerance: {FP16_TOLERANCE})"
    return f"{encoder} on {device}"


def default_encoder() -> str:
    """The encoder of a new index: `onnx-int8` (int8 weights on ONNX Runtime: within 0.005 nDCG@10 of `torch` on
    SciFact, SQuAD 2.0 and HotpotQA, 4.4-5.9x torch's chunks per CPU-second; `scale_encoder_sets.json`) when ONNX
    Runtime and onnx are installed, else `torch`. An existing index keeps the encoder its manifest records."""
    if find_spec("onnxruntime") is not None and find_spec("onnx") is not None:
        return "onnx-int8"
    log.info("encoder torch: install ragsieve[fast] for the faster onnx-int8 encoder")
    return "torch"
