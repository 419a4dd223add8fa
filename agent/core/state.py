"""The run's changing data, in one serialisable object (clients live in `Deps`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializeAsAny

from ragsieve.agent.core.locations import deepest_location
from ragsieve.agent.judging.modes import JudgeMode
from ragsieve.agent.llm.chat import Usage
from ragsieve.agent.modes import ContextRule
from ragsieve.tools.modes import TextMode
from ragsieve.tools.types import Hit


class Evidence(TextMode):
    """What backs the context after the conformal step: `none`, `fast` (no trusted judge), `judged`, `strong`
    (a chunk passed the conformal cutoff)."""

    NONE = "none"
    FAST = "fast"
    JUDGED = "judged"
    STRONG = "strong"


class CoverageLoss(TextMode):
    """Why an answer's context holds less than the conformal set, so its coverage is below 1 - alpha:
    `corpus_cap` (more chunks passed the cutoff than `conformal.corpus_max` admits), `budget` (the context
    budget cut passing chunks), `segments` (RSE with `segments.keep_evidence = false` dropped passing chunks)."""

    CORPUS_CAP = "corpus_cap"
    BUDGET = "budget"
    SEGMENTS = "segments"


class Abstention(TextMode):
    """How an abstention was decided: `no_evidence` (nothing to answer from), `passages` (the calibrated
    verdict: the closest passages instead), `model` (the model declined), `mixed` (it answered and declined),
    `ungrounded` (under `abstention.strict`, an answer that cited nothing replaced by the closest passages)."""

    NO_EVIDENCE = "no_evidence"
    PASSAGES = "passages"
    MODEL = "model"
    MIXED = "mixed"
    UNGROUNDED = "ungrounded"


class TraceEvent(BaseModel):
    """One step as it ran. `summary` is the step's model where it has one (`agent.core.summaries`, the judge's
    `JudgeRoundReport`), else a dict; its JSON is the same either way (a model dumps its own fields)."""

    step: str
    outcome: str
    summary: dict[str, Any] | SerializeAsAny[BaseModel] = Field(default_factory=dict)
    duration_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)

    def summary_dict(self) -> dict[str, Any]:
        """The summary as the trace's JSON holds it (a model's fields in their order)."""
        return self.summary.model_dump() if isinstance(self.summary, BaseModel) else self.summary


class Citation(BaseModel):
    number: int
    chunk_id: str
    source: str
    title: str = ""
    line_start: int | None = None
    line_end: int | None = None
    symbol: str = ""
    merged: list[str] = Field(default_factory=list)  # other chunks with this label, cited as this one
    cited: bool = True  # False: a top retrieved passage the answer did not cite (`agent/answer/also_retrieved.py`)
    # who made the citation: "model" (its own [n] in the text), "inferred" (ragsieve, by word overlap, when the
    # model cited nothing: no marker in the text), "retrieved" (listed, not cited: `cited` False)
    origin: Literal["model", "inferred", "retrieved"] = "model"
    heading: str = ""  # a web section's heading ("json — JSON encoder and decoder"), shown instead of its anchor id

    def label(self) -> str:
        """`path:start-end (Class.method)` for code, `path:start-end` for text, the source otherwise."""
        where = self.source
        if self.line_start is not None:
            where += f":{self.line_start}" + (f"-{self.line_end}" if self.line_end and self.line_end != self.line_start else "")
        if self.symbol.startswith("#"):  # a web page's section anchor
            return f"{self.source}{self.symbol}"
        return f"{where} ({self.symbol})" if self.symbol else where

    def location(self) -> str:
        """The deepest location known: URL with `#anchor`, `file#page=N` or `path#L10-L24`."""
        return deepest_location(self.source, self.symbol, self.line_start, self.line_end)

    def public(self) -> dict[str, Any]:
        """The citation as every response carries it: its fields, `label` and `location`."""
        return self.model_dump() | {"label": self.label(), "location": self.location()}


class JudgeRoundReport(BaseModel):
    """One judge round: what was judged, how, and what it added to the relevant set."""

    round: int
    judged: int
    mode: JudgeMode  # see ragsieve.agent.judging.rounds
    reason: str
    batches: list[dict[str, Any]] = Field(default_factory=list)
    decoys: int = 0
    decoys_relevant: int = 0
    order_check: dict[str, Any] | None = None
    raw_true: list[str] = Field(default_factory=list)
    decided_by_score: list[str] = Field(default_factory=list)
    new_relevant: list[str] = Field(default_factory=list)
    relevant_total: int = 0


class JudgeLoop(BaseModel):
    """What the judge, expand and fallback steps pass each other."""

    rounds: list[JudgeRoundReport] = Field(default_factory=list)
    trusted: dict[str, bool] = Field(default_factory=dict)  # chunk id -> verdict of informative rounds
    discovered: list[str] = Field(default_factory=list)  # every candidate id, in the order it was offered
    neighbour_of: dict[str, str] = Field(default_factory=dict)  # neighbour chunk id -> the relevant chunk it came from
    distrusted: str | None = None  # why the judge is not trusted for this question
    stop_reason: str | None = None  # why the loop stopped
    selection: dict[str, Any] = Field(default_factory=dict)  # the combination rule's account of the context
    rule: ContextRule | None = None  # loop.combine as applied (auto resolved: ragsieve.agent.judging.reliability)
    rule_reason: str | None = None
    rule_adds_fast: bool = False  # auto: the statistical evidence includes the fast context
    # auto chose `relevant` and the judge's measured recall, bounded below, reaches 1 - alpha: the relevant set
    # stands alone, without the conformal set (ragsieve.agent.judging.bounds.relevant_alone)
    rule_alone: bool = False
    # auto: the judge's measured decoy acceptance is too high for it to decide anything (bounds.judge_barred)
    barred: str | None = None
    # auto: the judge's measured recall does not support an abstention on its "nothing relevant" (issue 56:
    # bounds.abstention_supported): the model reads the context instead
    abstain_blocked: str | None = None
    # check (c) of the first round, deferred to the next round's pass (ragsieve.agent.core.order): the chunks it
    # judges again and the decoys among them; set when the plan's judge step leads to expand and back
    order_pending: list[Hit] = Field(default_factory=list, exclude=True)
    order_decoys: list[str] = Field(default_factory=list, exclude=True)
    order_deferrable: bool = Field(False, exclude=True)

    @property
    def judge_trusted(self) -> bool:
        """The judge ran, was not distrusted for this question, and left verdicts to act on."""
        return bool(self.rounds) and not self.distrusted and bool(self.trusted)


class FallbackRecord(BaseModel):
    """The sparse-information fallback: what it looked at and what it added."""

    sparse_rows: int = 0
    candidates: list[str] = Field(default_factory=list)
    rerank: str = ""
    rerank_note: str | None = None
    judge_mode: JudgeMode | None = None
    judge_reason: str = ""
    added: list[str] = Field(default_factory=list)
    context_size: int = 0
    batches: list[dict[str, Any]] = Field(default_factory=list)
    decoys_relevant: str | None = None  # "k of n" decoys the judge called relevant
    score_based: bool = False  # added by rerank order because the judge was not used


class ConformalRecord(BaseModel):
    """The conformal threshold applied to the context (CONFLARE)."""

    kind: str
    alpha: float
    qhat: float | None  # None: +inf, every chunk passes
    calibration_n: int
    coverage: float  # 1 - alpha: the probability the answer-bearing chunk is kept
    passing: list[str] = Field(default_factory=list)  # the conformal set: pool chunks under the cutoff
    # fast-context chunks the step joined to the context (no trusted judge, or a rule that adds the fast
    # context): later stages that reshape the context (RSE) keep them, as they keep the conformal set
    promised: list[str] = Field(default_factory=list)
    reduced: list[CoverageLoss] = Field(default_factory=list)  # empty: the context holds the whole conformal set
    corpus_cap: int | None = None  # `conformal.corpus_max` when it bound (a passing chunk lay beyond it)
    # what `coverage` rests on: the conformal set in the context (split conformal, marginal), or the judge's
    # measured recall bounded below (the relevant set alone; `loop.relevant_alone`)
    basis: str = "conformal set"

    @property
    def guaranteed(self) -> bool:
        """True when the context holds the whole conformal set, so `coverage` (1 - alpha) holds as stated."""
        return not self.reduced


class SegmentRecord(BaseModel):
    """One relevant segment (dsRAG RSE): consecutive chunks of one document."""

    doc_id: str
    chunk_ids: list[str]
    value: float


class RunState(BaseModel):
    """Everything a step reads or writes. `pool` holds every hit seen, by chunk id."""

    question: str
    plan: str
    asked: str | None = None  # the user's words when `question` is a rewrite of a follow-up (conversation)
    instructions: str | None = None  # the client's system messages: honoured by the answer step only
    history: list[dict[str, str]] = Field(default_factory=list)  # a follow-up's earlier turns ({role, text})
    truncated: bool = False  # the answer was cut by max_tokens (finish_reason "length")
    first_stage: list[str] = Field(default_factory=list)  # chunk ids of the first retrieval, ranked
    candidates: list[Hit] = Field(default_factory=list)
    pool: dict[str, Hit] = Field(default_factory=dict)
    judged: dict[str, bool] = Field(default_factory=dict)
    relevant: list[str] = Field(default_factory=list)
    context: list[Hit] = Field(default_factory=list)
    draft: str | None = None
    draft_citations: list[Citation] = Field(default_factory=list)
    draft_context: list[str] = Field(default_factory=list)  # chunk ids the draft was written from
    resolved: bool | None = None
    fallback_used: bool = False
    answer: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    loop: JudgeLoop = Field(default_factory=JudgeLoop)
    fallback: FallbackRecord | None = None
    conformal: ConformalRecord | None = None
    segments: list[SegmentRecord] = Field(default_factory=list)
    evidence: Evidence | None = None  # set by the conformal step
    abstention: Abstention | None = None  # how an abstention was decided (ungrounded: strict replaced an uncited answer)
    citations_inferred: bool = False  # citations chosen by word overlap because the model cited none
    stopped: str | None = None  # why the runner stopped early (step bound)
    notes: list[str] = Field(default_factory=list)  # free-form text for the trace reader only
    trace: list[TraceEvent] = Field(default_factory=list)
    steps_taken: int = 0

    @property
    def nothing_relevant(self) -> bool:
        """A judge trusted for this question judged chunks and called none relevant, and no chunk counts as
        relevant otherwise (decided by score for a failed batch, added by the fallback): the signal the answer
        step turns into a calibrated abstention (`ragsieve.agent.steps.answer`)."""
        return (
            self.loop.judge_trusted
            and not self.relevant
            and not any(self.loop.trusted.values())
            and self.loop.abstain_blocked is None
        )

    def remember(self, hits: list[Hit]) -> None:
        for hit in hits:
            self.pool.setdefault(hit.chunk_id, hit)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for event in self.trace:
            total = total.plus(event.usage)
        return total
