"""The reranker protocol and the one place hits are reordered by its scores.

A provider scores (query, passage) pairs: `score(query, texts)` returns one
float per text, higher = more relevant, in the order given. `ProviderReranker`
turns those scores into reordered hits whose `rank` is the new position and
whose `extra` keeps `rerank_score` and `rank_before` (the rank the hit came
with), so a trace can show what moved. Ties keep the incoming order.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ragsieve.tools.errors import ModelEndpointError
from ragsieve.tools.types import Hit


class RerankMethod(str, Enum):
    FLASHRANK = "flashrank"
    CROSS_ENCODER = "cross-encoder"
    HTTP = "http"
    EMBEDDING = "embedding"  # no reranker ran: the fallback's order by embedding similarity (said so)


class RerankResult(BaseModel):
    hits: list[Hit] = Field(default_factory=list)  # best first; rank = new position, extra["rerank_score"]
    method: RerankMethod
    note: str = ""


@runtime_checkable
class RerankProvider(Protocol):
    kind: str  # a RerankMethod value
    model: str

    def describe(self) -> str: ...

    def load(self) -> None:
        """Make the model usable now; raise ModelUnavailableError with the reason when it cannot be."""

    def score(self, query: str, texts: list[str]) -> list[float]: ...


def passage_text(hit: Hit) -> str:
    """What a reranker reads: the chunk's title line (when it has one) and its text."""
    chunk = hit.chunk
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def restamp(hit: Hit, rank: int, score: float | None) -> Hit:
    extra = dict(hit.extra)
    if score is not None:
        extra["rerank_score"] = float(score)
    if hit.rank:
        extra.setdefault("rank_before", float(hit.rank))
    return hit.model_copy(update={"rank": rank, "extra": extra})


class ProviderReranker:
    """`run(query, hits)` -> RerankResult, with any provider (the `rerank` step and the fallback share it)."""

    def __init__(self, provider: RerankProvider) -> None:
        self.provider = provider

    @property
    def description(self) -> str:
        return self.provider.describe()

    def run(self, query: str, hits: list[Hit]) -> RerankResult:
        method = RerankMethod(self.provider.kind)
        if not hits:
            return RerankResult(hits=[], method=method, note="no hits to rerank")
        scores = [float(s) for s in self.provider.score(query, [passage_text(h) for h in hits])]
        if len(scores) != len(hits) or not all(math.isfinite(s) for s in scores):
            raise ModelEndpointError(
                f"reranker {self.description} returned {len(scores)} scores for {len(hits)} passages, or a non-finite score"
            )
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
        return RerankResult(
            hits=[restamp(hits[i], rank, scores[i]) for rank, i in enumerate(order, start=1)],
            method=method,
            note=self.description,
        )
