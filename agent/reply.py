"""What a question gets back: the typed `Answer` (its `--json` shape, `public`), built from a finished run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ragsieve.agent.answer.also_retrieved import STOPPED
from ragsieve.agent.answer.grounding import ABSTENTIONS, Grounding, grounding_of
from ragsieve.agent.core.state import (
    Abstention,
    Citation,
    ConformalRecord,
    Evidence,
    FallbackRecord,
    JudgeLoop,
    RunState,
    SegmentRecord,
    TraceEvent,
)
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.chat import Usage
from ragsieve.tools.types import Hit

MAX_QUESTION_CHARS = 20_000


class Answer(BaseModel):
    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    plan: str
    resolved: bool | None = None
    context: list[Hit] = Field(default_factory=list)
    first_stage: list[str] = Field(default_factory=list)
    trace: list[TraceEvent] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    loop: JudgeLoop = Field(default_factory=JudgeLoop)
    fallback: FallbackRecord | None = None
    conformal: ConformalRecord | None = None
    segments: list[SegmentRecord] = Field(default_factory=list)
    citations_inferred: bool = False
    evidence: Evidence | None = None
    abstention: Abstention | None = None
    stopped: str | None = None
    notes: list[str] = Field(default_factory=list)
    asked: str | None = None  # the user's words when `question` is the rewrite of a follow-up
    truncated: bool = False  # max_tokens cut the answer (the text says so; OpenAI finish_reason "length")
    grounding: Grounding = Grounding.CITED  # does the text cite a listed passage (agent/answer/grounding.py)
    trace_id: str | None = None  # the question's OpenTelemetry trace, while tracing is on (docs/tracing.md)

    @property
    def grounded(self) -> bool:
        """The model's text cites the documents with its own markers; False when ragsieve inferred the citations
        (`grounding` "inferred": the model cited nothing) and for an abstention."""
        return self.grounding == Grounding.CITED

    @property
    def coverage(self) -> float | None:
        """The calibrated coverage of the context (1 - alpha) when the conformal step applied a threshold."""
        return self.conformal.coverage if self.conformal is not None else None

    @property
    def coverage_guaranteed(self) -> bool | None:
        """False when the context holds less than the conformal set (a binding `corpus_max`, the budget, or
        RSE without `keep_evidence`: `conformal.reduced` says which), so `coverage` is not guaranteed."""
        return self.conformal.guaranteed if self.conformal is not None else None

    def public(self) -> dict[str, Any]:
        """The `--json` shape: answer, citations, trace, usage (plus plan and context ids)."""
        return {
            "question": self.question,
            "plan": self.plan,
            "answer": self.answer,
            "grounding": self.grounding.value,
            "grounded": self.grounded,
            "citations": [c.public() for c in self.citations],
            "context": [h.chunk_id for h in self.context],
            "resolved": self.resolved,
            "trace": [e.model_dump() for e in self.trace],
            "usage": self.usage.model_dump(),
            "loop": self.loop.model_dump(),
            "fallback": self.fallback.model_dump() if self.fallback else None,
            "conformal": self.conformal.model_dump() if self.conformal else None,
            "segments": [s.model_dump() for s in self.segments],
            "citations_inferred": self.citations_inferred,
            "evidence": self.evidence,
            "abstention": self.abstention,
            "stopped": self.stopped,
            "asked": self.asked,
            "truncated": self.truncated,
            "notes": self.notes,
        } | ({"trace_id": self.trace_id} if self.trace_id else {})


def check_question(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise UsageError('the question is empty: ask something, e.g. ragsieve ask "How do I ...?" --index DIR')
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(f"the question is {len(question)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return question.strip()


def answer_of(state: RunState, usage: Usage) -> Answer:
    """The `Answer` of a run whose plan has finished (or stopped), with its grounding and `usage`."""
    text = state.answer or ""
    abstained = state.abstention in ABSTENTIONS or (state.stopped is not None and text.startswith(STOPPED))
    grounding = grounding_of(text, state.citations, abstained=abstained or not text.strip(), inferred=state.citations_inferred)
    return Answer(
        grounding=grounding,
        question=state.question,
        answer=state.answer or "",
        citations=state.citations,
        plan=state.plan,
        resolved=state.resolved,
        context=state.context,
        first_stage=state.first_stage,
        trace=state.trace,
        usage=usage,
        loop=state.loop,
        fallback=state.fallback,
        conformal=state.conformal,
        segments=state.segments,
        citations_inferred=state.citations_inferred,
        evidence=state.evidence,
        abstention=state.abstention,
        stopped=state.stopped,
        notes=state.notes,
        asked=state.asked,
        truncated=state.truncated,
    )
