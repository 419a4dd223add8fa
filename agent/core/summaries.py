"""Typed trace summaries of the steps: what `StepResult.summary` holds in memory, the trace's JSON unchanged.

A step's summary is a `StepSummary`: its fields are the keys the trace has always shown, and it dumps the fields
the step set, in the order it set them (as the dict it used to build: a key set again keeps its place; a field
never set is absent, as the dict form's optional keys were), so `model_dump()` gives that dict. The judge's
summary is its `JudgeRoundReport` (`agent.core.state`).
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)


class StepSummary(BaseModel):
    """Base of the steps' summaries: the fields a step set are dumped, in the order it set them."""

    model_config = ConfigDict(extra="forbid")
    _order: list[str] = PrivateAttr(default_factory=list)  # the fields set, first setting first

    @model_validator(mode="wrap")
    @classmethod
    def _keep_the_order_given(cls, data: Any, handler: ModelWrapValidatorHandler[StepSummary]) -> StepSummary:
        made = handler(data)
        made._order = [key for key in data if key in cls.model_fields] if isinstance(data, dict) else []
        return made

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields and name not in self._order:
            self._order.append(name)

    @model_serializer(mode="wrap")
    def _set_fields_in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: dumped[key] for key in self._order if key in dumped}


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


class ConformalSummary(StepSummary):
    """The conformal step: `status` disabled, uncalibrated, empty or applied, and what the threshold kept."""

    status: str
    kind: str = ""
    alpha: float = 0.0
    coverage: float = 0.0
    qhat: float | None = None  # None: +inf, every chunk passes
    threshold: str = ""
    candidates: str = ""  # conformal.candidates: context, pool or corpus
    passing: list[str] = []
    best: float | None = None  # the lowest nonconformity score: it passes when <= qhat
    combined_with: str = ""
    corpus_cap: dict[str, Any] = {}
    promised: list[str] = []
    rule: str | None = None
    min_keep_applied: str = ""
    over_budget: list[str] = []
    budget_note: str = ""
    kept: list[str] = []
    removed: list[str] = []
    note: str = ""
    warnings: list[str] = []
    coverage_guaranteed: bool = True
    coverage_basis: str = ""


class SegmentsSummary(StepSummary):
    """The RSE step: `status` disabled, empty, no_segment or applied, and the segments it chose."""

    status: str
    preset: str = ""
    params: dict[str, Any] = {}
    relevance: str = ""
    values: dict[str, float] = {}
    kept: list[str] = []
    removed: list[str] = []
    note: str = ""
    coverage_note: str = ""
    segments: list[dict[str, Any]] = []
    added: list[str] = []
    context: list[str] = []
    protected: list[str] = []
