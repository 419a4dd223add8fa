"""The run's changing data, in one serialisable object (clients live in `Deps`)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agent.chat import Usage
from tools.types import Hit


class TraceEvent(BaseModel):
    step: str
    outcome: str
    summary: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)


class Citation(BaseModel):
    number: int
    chunk_id: str
    source: str
    title: str = ""
    line_start: int | None = None
    line_end: int | None = None

    def label(self) -> str:
        where = self.source
        if self.line_start is not None:
            where += f":{self.line_start}" + (f"-{self.line_end}" if self.line_end and self.line_end != self.line_start else "")
        return where


class RunState(BaseModel):
    """Everything a step reads or writes. `pool` holds every hit seen, by chunk id."""

    question: str
    plan: str
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
    notes: dict[str, Any] = Field(default_factory=dict)
    trace: list[TraceEvent] = Field(default_factory=list)
    steps_taken: int = 0

    def remember(self, hits: list[Hit]) -> None:
        for hit in hits:
            self.pool.setdefault(hit.chunk_id, hit)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for event in self.trace:
            total = total.plus(event.usage)
        return total
