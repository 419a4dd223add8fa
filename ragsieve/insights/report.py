"""The insights report of one index over a period, from its logged questions; CSV and JSON exports."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel, Field

from ragsieve.insights.analysis import cited_documents, doc_of, group_questions, unreached_documents, weekly
from ragsieve.insights.log import Embed, vector_of
from ragsieve.insights.record import Outcome, QuestionRecord

EXAMPLES = 5
MAX_FLAGGED = 200
TOP_DOCS = 20
Closest = Callable[[str], list[dict[str, Any]]]


class TopicGroup(BaseModel):
    id: str  # g1, g2 ... biggest first (stable for one report; `--export-eval` takes it)
    label: str
    count: int
    distinct: int
    trend: list[tuple[str, int]]  # (week starting Monday, questions)
    examples: list[str]
    closest: list[dict[str, Any]] = Field(default_factory=list)  # the passages the index has nearest the label
    question_ids: list[str] = Field(default_factory=list)


class Flagged(BaseModel):
    """A question whose answers were marked wrong or low-confidence, once however often it was asked: its
    most recent such answer, and `count` such answers in the period (`ids`: all of them, newest first)."""

    id: str
    at: float
    question: str
    outcome: str
    rating: int | None
    low_confidence: bool
    why: str
    sources: list[str]
    count: int = 1
    ids: list[str] = Field(default_factory=list)


class Report(BaseModel):
    index: str
    since: float
    until: float
    totals: dict[str, int]
    groups: list[TopicGroup]
    flagged: list[Flagged]
    most_cited: list[tuple[str, int]]  # documents by the answers (not abstentions) citing them
    unreached: list[str]
    unreached_total: int
    clustered: str  # what was embedded/clustered, for the reader of the numbers


def build_report(
    records: list[QuestionRecord],
    *,
    index: str,
    since: float,
    until: float,
    documents: list[str],
    distance: float = 0.75,
    embed: Embed | None = None,
    closest: Closest | None = None,
    max_unreached: int = 200,
) -> Report:
    """Everything the insights page shows. `documents`: the index's document ids; `embed` embeds questions
    logged without a vector; `closest(question)` lists the index's nearest passages (no LLM)."""
    records = [r for r in records if r.index == index and since <= r.at <= until]
    totals = {o.value: sum(r.outcome is o for r in records) for o in Outcome}
    totals |= {
        "questions": len(records),
        "low_confidence": sum(r.low_confidence for r in records),
        "thumbs_up": sum(r.rating == 1 for r in records),
        "thumbs_down": sum(r.rating == -1 for r in records),
    }
    open_ = [r for r in records if r.unanswered]
    groups = _groups(open_, since, until, distance, embed, closest)
    flagged = _flagged([r for r in reversed(records) if not r.unanswered and (r.rating == -1 or r.low_confidence)])
    cites = [r.citations for r in records]
    unreached = unreached_documents(documents, cites)  # an abstention's closest passages reached their documents
    answered_cites = [r.citations for r in records if r.outcome is Outcome.ANSWERED]
    embedded = sum(r.vector is not None for r in open_)
    return Report(
        index=index,
        since=since,
        until=until,
        totals=totals,
        groups=groups,
        flagged=flagged[:MAX_FLAGGED],
        most_cited=cited_documents(answered_cites).most_common(TOP_DOCS),
        unreached=unreached[:max_unreached],
        unreached_total=len(unreached),
        clustered=f"{len(open_)} unanswered questions grouped ({embedded} with the embedding cached at "
        f"log time, {len(open_) - embedded} embedded now); answered ones are not clustered",
    )


def _groups(
    open_: list[QuestionRecord], since: float, until: float, distance: float, embed: Embed | None, closest: Closest | None
) -> list[TopicGroup]:
    if not open_:
        return []
    vectors = [vector_of(r) for r in open_]
    missing = [i for i, v in enumerate(vectors) if v is None]
    if missing:
        if embed is None:
            raise ValueError("logged questions without an embedding need an embed function")
        fresh = np.asarray(embed([open_[i].question for i in missing]), dtype=np.float32)
        for i, vec in zip(missing, fresh):
            vectors[i] = vec
    matrix = np.vstack([v for v in vectors if v is not None])
    out = []
    for n, g in enumerate(group_questions([r.question for r in open_], matrix, distance), start=1):
        members = [open_[i] for i in g.members]
        out.append(
            TopicGroup(
                id=f"g{n}",
                label=g.label,
                count=len(members),
                distinct=len(g.texts),
                trend=weekly([r.at for r in members], since, until),
                examples=[t for t, _ in g.texts.most_common(EXAMPLES)],
                closest=closest(g.label) if closest is not None else [],
                question_ids=[r.id for r in members],
            )
        )
    return out


def _flagged(newest_first: list[QuestionRecord]) -> list[Flagged]:
    """One row per flagged question (the same text, case and spacing aside), most recently flagged first;
    a question marked wrong at least once reads "marked wrong"."""
    rows: dict[str, Flagged] = {}
    for r in newest_first:
        key = " ".join(r.question.lower().split())
        row = rows.get(key)
        if row is None:
            rows[key] = Flagged(
                id=r.id,
                at=r.at,
                question=r.question,
                outcome=r.outcome.value,
                rating=r.rating,
                low_confidence=r.low_confidence,
                sources=_sources(r),
                ids=[r.id],
                why="marked wrong" if r.rating == -1 else "low confidence",
            )
            continue
        row.count += 1
        row.ids.append(r.id)
        row.low_confidence = row.low_confidence or r.low_confidence
        if r.rating == -1:
            row.why = "marked wrong"
            row.rating = row.rating if row.rating == -1 else -1
    return list(rows.values())


def _sources(r: QuestionRecord) -> list[str]:
    return list(dict.fromkeys(c["source"] for c in r.citations if c.get("cited", True)))


def parse_since(text: str, now: float) -> float:
    """`30d`, `12h`, `6w` before `now`, or an ISO date/time (UTC when it names no zone)."""
    text = text.strip()
    units = {"h": 3600, "d": 86400, "w": 7 * 86400}
    if text[:-1].isdigit() and text[-1:] in units:
        return now - int(text[:-1]) * units[text[-1]]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"invalid --since {text!r}: give e.g. 30d, 12h, 6w or a date such as 2026-01-31") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


CSV_FIELDS = (
    "id",
    "at",
    "surface",
    "plan",
    "outcome",
    "low_confidence",
    "rating",
    "score",
    "threshold",
    "conformal_best",
    "qhat",
    "latency_s",
    "group",
    "question",
    "sources",
)


def to_csv(report: Report, records: list[QuestionRecord]) -> str:
    """One line per logged question of the report's period, with its topic group (unanswered ones)."""
    group_of = {qid: g.id for g in report.groups for qid in g.question_ids}
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_FIELDS)
    for r in records:
        if r.index != report.index or not report.since <= r.at <= report.until:
            continue
        at = dt.datetime.fromtimestamp(r.at, dt.timezone.utc).isoformat(timespec="seconds")
        writer.writerow(
            [
                r.id,
                at,
                r.surface.value,
                r.plan,
                r.outcome.value,
                int(r.low_confidence),
                "" if r.rating is None else r.rating,
                "" if r.score is None else r.score,
                "" if r.threshold is None else r.threshold,
                _blank(r.conformal_best),
                _blank(r.qhat),
                r.latency_s,
                group_of.get(r.id, ""),
                _cell(r.question),
                _cell(" ".join(_sources(r))),
            ]
        )
    return buf.getvalue()


def _blank(value: float | None) -> str | float:
    return "" if value is None else value


def _cell(text: str) -> str:
    """A spreadsheet does not run a cell that starts like a formula (CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def document_ids(store: Any) -> list[str]:
    """The index's document ids (index order)."""
    return list(store.documents())


__all__ = ["Report", "TopicGroup", "Flagged", "build_report", "parse_since", "to_csv", "document_ids", "doc_of"]
