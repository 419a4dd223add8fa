"""The insights of one served or opened index: its logged questions, documents, encoder and nearest passages.

Read as principals (`readers`, an admin-scoped key with principals: docs/access.md), every part of the report
that comes from the documents (closest passages, the citations behind "most cited" and the flagged answers'
sources, the documents no question reached, the CSV's sources, an exported eval set's corpus) holds only
documents those principals may read; the questions themselves and the counts of outcomes are the index's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

from ragsieve.insights.log import QuestionLog
from ragsieve.insights.record import QuestionRecord
from ragsieve.insights.report import Report, build_report
from ragsieve.tools.index.search.where import Where
from ragsieve.tools.types import Hit

CLOSEST = 3
SNIPPET_CHARS = 240


class Searchable(Protocol):
    """What the insights read of an index's orchestrator (an `Orchestrator` or the service's live one)."""

    index: Any

    def retrieve(self, question: str, top_k: int | None = None, *, where: Where | None = None) -> list[Hit]: ...


def insights_for(
    log: QuestionLog,
    name: str,
    orch: Searchable,
    *,
    since: float,
    until: float,
    distance: float,
    readers: tuple[str, ...] | None = None,
) -> tuple[Report, list[QuestionRecord]]:
    """The report of index `name` over [since, until] and the records it was made from; with `readers`, as
    those principals read the index (documents they may not read are left out of every field)."""
    records = log.rows(name, since)
    store = orch.index.store
    documents = list(store.documents())
    readable = None if readers is None else readable_sources(orch.index, readers)
    if readable is not None:
        records = [dataclasses.replace(r, citations=[c for c in r.citations if readable(c["source"])]) for r in records]
        documents = [d for d in documents if readable(_source_of(store, d))]
    where = None if readers is None else Where(readers=readers)

    def embed(texts: list[str]):
        return orch.index.embedder.embed(texts)

    def closest(question: str) -> list[dict[str, Any]]:
        out = []
        for hit in orch.retrieve(question, top_k=CLOSEST, where=where):
            if readable is not None and not readable(hit.chunk.source):  # the filter's, checked once more
                continue
            text = " ".join(hit.chunk.text.split())
            out.append(
                {
                    "chunk_id": hit.chunk_id,
                    "source": hit.chunk.source,
                    "title": hit.chunk.title,
                    "cosine": None if hit.dense_score is None else round(float(hit.dense_score), 4),
                    "snippet": text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " ...",
                }
            )
        return sorted(out, key=lambda p: -1.0 if p["cosine"] is None else -p["cosine"])

    report = build_report(
        records, index=name, since=since, until=until, documents=documents, distance=distance, embed=embed, closest=closest
    )
    return report, records


def readable_sources(index: Any, readers: tuple[str, ...]) -> Callable[[str], bool]:
    """A test of sources: whether `readers` may read each, by the index's access labels (`index.root`)."""
    from ragsieve.tools.access.labels import load

    return load(index.root).grant(readers)


def _source_of(store: Any, doc_id: str) -> str:
    source_of = getattr(store, "source_of", None)
    if source_of is not None:
        return source_of(doc_id)
    chunks = store.chunks_of(doc_id)
    return chunks[0].source if chunks else doc_id
