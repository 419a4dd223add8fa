"""Mode Enums shared by the tools; parse errors list the valid values."""
from __future__ import annotations

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
