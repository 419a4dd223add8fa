"""The insights of one served or opened index: its logged questions, documents, encoder and nearest passages."""
from __future__ import annotations

from typing import Any, Protocol

from ragsieve.insights.log import QuestionLog
from ragsieve.insights.record import QuestionRecord
from ragsieve.insights.report import Report, build_report
from ragsieve.tools.types import Hit

CLOSEST = 3
SNIPPET_CHARS = 240


class Searchable(Protocol):
    """What the insights read of an index's orchestrator (an `Orchestrator` or the service's live one)."""

    index: Any

    def retrieve(self, question: str, top_k: int | None = None) -> list[Hit]: ...


def insights_for(log: QuestionLog, name: str, orch: Searchable, *, since: float, until: float,
                 distance: float) -> tuple[Report, list[QuestionRecord]]:
    """The report of index `name` over [since, until] and the records it was made from."""
    records = log.rows(name, since)
    documents = list(orch.index.store.documents())

    def embed(texts: list[str]):
        return orch.index.embedder.embed(texts)

    def closest(question: str) -> list[dict[str, Any]]:
        out = []
        for hit in orch.retrieve(question, top_k=CLOSEST):
            text = " ".join(hit.chunk.text.split())
            out.append({"chunk_id": hit.chunk_id, "source": hit.chunk.source, "title": hit.chunk.title,
                        "cosine": None if hit.dense_score is None else round(float(hit.dense_score), 4),
                        "snippet": text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " ..."})
        return out

    report = build_report(records, index=name, since=since, until=until, documents=documents, distance=distance,
                          embed=embed, closest=closest)
    return report, records
