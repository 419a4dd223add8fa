"""One logged question: what happened to it (never the answer text unless the owner asks for it)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ragsieve.agent.core.state import Citation, ConformalRecord, TraceEvent
from ragsieve.insights.redact import redact


class Surface(str, Enum):
    """Where the question came in."""

    CHAT_COMPLETIONS = "chat_completions"
    ASK = "ask"
    CHAT_PAGE = "chat_page"
    WIDGET = "widget"
    MCP = "mcp"


class Outcome(str, Enum):
    """What the question got. `passages`: the model abstained, the calibrated score said answerable, so the
    reply quoted passages; `abstained_calibration`: no passage passed the calibrated evidence (no model call);
    `abstained_ungrounded`: the model's answer cited none of the passages (under `abstention.strict`, the
    widget's default, it was replaced by the closest passages; otherwise shown as "not grounded")."""

    ANSWERED = "answered"
    PASSAGES = "passages"
    ABSTAINED_MODEL = "abstained_model"
    ABSTAINED_CALIBRATION = "abstained_calibration"
    ABSTAINED_UNGROUNDED = "abstained_ungrounded"


UNANSWERED = (Outcome.ABSTAINED_MODEL, Outcome.ABSTAINED_CALIBRATION, Outcome.ABSTAINED_UNGROUNDED)
_BY_ABSTENTION = {
    None: Outcome.ANSWERED,
    "mixed": Outcome.ANSWERED,
    "passages": Outcome.PASSAGES,
    "model": Outcome.ABSTAINED_MODEL,
    "no_evidence": Outcome.ABSTAINED_CALIBRATION,
    "ungrounded": Outcome.ABSTAINED_UNGROUNDED,
}


class AnswerLike(Protocol):
    """What the log reads of an `Answer` (`ragsieve.agent.reply.Answer`)."""

    question: str
    answer: str
    plan: str
    asked: str | None
    abstention: str | None
    evidence: str | None
    resolved: bool | None
    citations: list[Citation]
    conformal: ConformalRecord | None
    trace: list[TraceEvent]


@dataclass(slots=True)
class QuestionRecord:
    """A row of the question log. Texts are redacted when the record is made (`record_of`)."""

    index: str
    surface: Surface
    at: float
    plan: str
    outcome: Outcome
    question: str
    latency_s: float
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    asked: str | None = None
    low_confidence: bool = False
    abstention: str | None = None
    evidence: str | None = None
    resolved: bool | None = None
    score: float | None = None  # the calibrated answerability score (top-1 cosine), when the run computed it
    threshold: float | None = None  # its cutoff at `abstention.max_false_answer`
    qhat: float | None = None  # the conformal cutoff the context was filtered with
    conformal_best: float | None = None  # the best candidate's nonconformity score (it passes when <= qhat)
    citations: list[dict[str, Any]] = field(default_factory=list)  # {"chunk_id", "source", "cited"}
    answer: str | None = None
    rating: int | None = None
    vector: bytes | None = None  # the redacted question's embedding (float16), filled by the writer

    @property
    def unanswered(self) -> bool:
        return self.outcome in UNANSWERED


def answerability_of(trace: list[TraceEvent]) -> dict[str, Any]:
    """The last answer step's calibrated answerability decision (score, threshold), if it made one."""
    for event in reversed(trace):
        if event.step == "answer" and isinstance(event.summary_dict().get("answerability"), dict):
            return event.summary_dict()["answerability"]
    return {}


def conformal_best_of(trace: list[TraceEvent]) -> float | None:
    """The last conformal step's best nonconformity score, when it applied a calibrated cutoff."""
    for event in reversed(trace):
        if event.step == "conformal" and event.summary_dict().get("status") == "applied":
            return _num(event.summary_dict().get("best"))
    return None


def outcome_of(abstention: str | None, grounding: str | None = None) -> Outcome:
    """The outcome of an answer's `abstention` and `grounding` (an answer grounded in no passage counts as
    abstained: the documentation did not answer it, whatever the model wrote)."""
    outcome = _BY_ABSTENTION.get(abstention, Outcome.ANSWERED)
    if outcome is Outcome.ANSWERED and grounding == "none":
        return Outcome.ABSTAINED_UNGROUNDED
    return outcome


def record_of(
    answer: AnswerLike,
    *,
    index: str,
    surface: Surface | str,
    at: float,
    latency_s: float,
    answer_id: str | None = None,
    keep_answer: bool = False,
) -> QuestionRecord:
    """The log row of one answered question: texts redacted, the answer text only with `keep_answer`."""
    grounding = getattr(answer, "grounding", None)
    outcome = outcome_of(answer.abstention, getattr(grounding, "value", grounding))
    decided = answerability_of(answer.trace)
    low = outcome is Outcome.ANSWERED and (
        answer.abstention == "mixed" or answer.resolved is False or (answer.conformal is not None and answer.evidence != "strong")
    )
    asked = redact(answer.asked) if answer.asked and answer.asked.strip() != answer.question.strip() else None
    rec = QuestionRecord(
        index=index,
        surface=Surface(surface),
        at=at,
        plan=answer.plan,
        outcome=outcome,
        question=redact(answer.question),
        latency_s=round(latency_s, 4),
        asked=asked,
        low_confidence=low,
        abstention=answer.abstention,
        evidence=answer.evidence,
        resolved=answer.resolved,
        score=_num(decided.get("score")),
        threshold=_num(decided.get("threshold")),
        qhat=answer.conformal.qhat if answer.conformal is not None else None,
        conformal_best=conformal_best_of(answer.trace),
        citations=[{"chunk_id": c.chunk_id, "source": c.source, "cited": c.cited} for c in answer.citations],
        answer=redact(answer.answer) if keep_answer else None,
    )
    if answer_id:
        rec.id = answer_id
    return rec


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
