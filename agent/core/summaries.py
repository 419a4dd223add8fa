"""Typed trace summaries of the steps: what `StepResult.summary` holds in memory, the trace's JSON unchanged.

A step's summary is a `StepSummary`: its fields are the keys the trace has always shown, in the same order, and
a field the step did not set is absent from the JSON (the dict form's optional keys), so `model_dump()` gives
the dict the step used to build. The judge's summary is its `JudgeRoundReport` (`agent.core.state`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class StepSummary(BaseModel):
    """Base of the steps' summaries: only the fields a step set are dumped, in declaration order."""

    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


class RankedHit(BaseModel):
    """One of the first stage's top hits: its fused score and its rank in each list (None: not in it)."""

    id: str
    score: float
    bm25_rank: int | None
    dense_rank: int | None


class RetrieveSummary(StepSummary):
    embedded: str = ""  # where the index's model embedded the question (set when an index is open)
    retrieved: int
    pool: int
    searched: str  # "all", or "R (non-sparse)" with retrieval.exclude_sparse
    top: list[RankedHit]


class RerankedHit(BaseModel):
    id: str
    before: int | None  # the first-stage rank (None: unknown)
    after: int
    score: float


class RerankSummary(StepSummary):
    reranker: str
    provider: str
    scored: int
    kept: int
    not_scored: int
    ranks: list[RerankedHit]


class DraftSummary(StepSummary):
    context: list[str]
    error: str = ""  # the model call failed: the draft is None
    chars: int = 0
    cited: list[str] = []
    fallback_context: bool = False


class GrewSummary(StepSummary):
    """Expand's `grew`: new candidates for the judge (its `converged` summary carries the combination rule's
    own account, a dict)."""

    iteration: int
    new_candidates: list[str]
    neighbours: list[str]
    relevant_total: int


class OutliersSummary(StepSummary):
    status: str  # disabled, empty or applied
    method: str = ""
    fit_size: int = 0
    runs_completed: int = 0
    runs: list[dict[str, Any]] = []
    min_outlier_freq: int = 0
    percentile: float = 0.0
    flag_counts: dict[str, int] = {}
    pool_outliers: list[str] = []
    kept_by_judge: list[str] = []
    kept_by_conformal: list[str] = []
    notes: list[str] = []
    note: str = ""
    kept: list[str]
    removed: list[str]
    plot: str = ""
