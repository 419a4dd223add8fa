"""Mode Enums and value lists shared by the tools, and named by settings (`ragsieve.agent.config`), which
depend on nothing but this foundation; parse errors list the valid values."""

from __future__ import annotations

import re
from enum import Enum
from typing import TypeVar

from ragsieve.tools.errors import UsageError


class TextMode(str, Enum):
    """A str-valued mode that is equal to its string and printed (`str`, f-strings) and serialised as it, so
    traces, JSON replies and pages keep the same strings (a plain `(str, Enum)` prints `Class.MEMBER` in an
    f-string on Python 3.11+)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class BM25Engine(str, Enum):
    BM25S = "bm25s"
    RANK_BM25 = "rank_bm25"


class FusionMode(str, Enum):
    RRF = "rrf"
    WEIGHTED = "weighted"


class RankingMode(str, Enum):
    """How first-stage hits are ordered: `hybrid` (the fused score) or `source-first` (definitions in source
    files, then other source code, tests, prose: `ragsieve.tools.index.query.source_first`)."""

    HYBRID = "hybrid"
    SOURCE_FIRST = "source-first"


class FusionSite(str, Enum):
    """Where BM25 and dense lists are fused: `client` (ragsieve's fusion functions, every backend), `server`
    (the engine's own ranker: Milvus `hybrid_search`), `auto` (server when it computes the same fusion as
    the client, i.e. RRF with equal weights on Milvus; else client)."""

    AUTO = "auto"
    CLIENT = "client"
    SERVER = "server"


class FaissKind(str, Enum):
    FLAT = "flat"
    HNSW = "hnsw"


class Backend(str, Enum):
    """Where an index is served from (`ragsieve.tools.index.backend`)."""

    LOCAL = "local"
    MILVUS = "milvus"


class Encoder(str, Enum):
    """How a local model embeds (`ragsieve.tools.index.embedders.local_embedder.Embedder.ENCODERS`): torch in
    fp32 or fp16, or the ONNX export on ONNX Runtime in fp32 or int8 (the fast extra)."""

    TORCH = "torch"
    TORCH_FP16 = "torch-fp16"
    ONNX = "onnx"
    ONNX_INT8 = "onnx-int8"


class ContextOrder(str, Enum):
    """The answer prompt's passage order (`ragsieve.tools.filters.ordering`)."""

    EDGES = "edges"
    RANK = "rank"


class DeviceKind(str, Enum):
    """Where a model runs (`ragsieve.tools.index.embedders.device` resolves it against what torch sees)."""

    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"
    MPS = "mps"


_DEVICE_SPEC = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")

# The pairwise (ONNX) models FlashRank knows (`ragsieve.tools.rerankers.flashrank_provider`); the listwise LLM
# ranker needs llama_cpp and is refused.
FLASHRANK_MODELS = (
    "ms-marco-TinyBERT-L-2-v2",
    "ms-marco-MiniLM-L-12-v2",
    "ms-marco-MultiBERT-L-12",
    "rank-T5-flan",
    "ce-esci-MiniLM-L12-v2",
    "miniReranker_arabic_v1",
)


E = TypeVar("E", bound=Enum)


def parse_enum(enum_cls: type[E], value: "str | E", what: str) -> E:
    """Parse a mode string into its Enum, or fail listing the valid values."""
    if isinstance(value, enum_cls):
        return value
    try:
        return enum_cls(value)
    except ValueError:
        valid = ", ".join(str(m.value) for m in enum_cls)
        raise UsageError(f"invalid {what} {value!r}: choose one of {valid}") from None


def parse_spec(spec: str) -> tuple[DeviceKind, int | None, str]:
    """(kind, GPU number, normalised text) of the device `auto`, `cpu`, `mps`, `cuda` or `cuda:N`; else UsageError."""
    text = str(spec).strip().lower()
    match = _DEVICE_SPEC.match(text)
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise UsageError(f"invalid device {spec!r}: choose auto, cpu, cuda, cuda:N or mps")
    return DeviceKind(match.group(1)), None if match.group(2) is None else int(match.group(2)), text


def check_spec(spec: str) -> str:
    """The device `spec` normalised when valid (a config validator); else UsageError listing the valid forms."""
    return parse_spec(spec)[2]


def choices(mode: type[Enum]) -> list[str]:
    """A mode's values, for a command line's `choices` (the Enum is the one list of them)."""
    return [str(m.value) for m in mode]
