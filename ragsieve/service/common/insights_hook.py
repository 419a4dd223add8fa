"""Where the served surfaces meet the question log: one hook, called once per answered question.

The HTTP surfaces (chat completions, `/v1/ask`, the chat page, the widget) run
every question through `QuestionJob`, which calls `InsightsHook.asked` when the
plan returns; MCP's `ask` calls it the same way. The hook builds the record
(redacting it) on the worker thread and queues it; embedding and SQLite happen
on the log's writer thread, off the request's path. Indexes not switched on in
`[insights]` are not logged at all.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ragsieve.agent.config import Config
from ragsieve.agent.errors import UsageError
from ragsieve.insights.log import FILE_NAME, Embed, QuestionLog
from ragsieve.insights.record import AnswerLike, QuestionRecord, Surface, record_of
from ragsieve.insights.report import Report


class InsightsHook:
    def __init__(self, log: QuestionLog, config: Config, names: set[str]):
        self.log, self.settings = log, config.insights
        self.names = {n for n in names if self.settings.logs(n)}
        self.reports: dict[
            tuple[str, str, tuple[str, ...] | None], tuple[float, Report, list[QuestionRecord]]
        ] = {}  # the insights routes' recent reports (web/insights.py)

    def logs(self, index: str) -> bool:
        return index in self.names

    def asked(self, index: str, surface: Surface, answer: AnswerLike, latency_s: float, answer_id: str | None = None) -> None:
        if index not in self.names:
            return
        self.log.submit(
            record_of(
                answer,
                index=index,
                surface=surface,
                at=self.log.clock(),
                latency_s=latency_s,
                answer_id=answer_id,
                keep_answer=self.settings.store_answers,
            )
        )

    def rated(self, answer_id: str, rating: int) -> None:
        self.log.rate(answer_id, rating)

    def close(self) -> None:
        self.log.close()


def open_insights(registry: Any, data_dir: str | None, *, clock: Any = time.time) -> InsightsHook | None:
    """The hook for `registry`'s indexes when `[insights] enabled`, else None (nothing is created)."""
    cfg = registry.config.insights
    if not cfg.enabled:
        return None
    served = set(registry.orchestrators)
    unknown = sorted(set(cfg.indexes) - served)
    if unknown:
        raise UsageError(f"[insights] indexes names unknown index(es) {unknown}; served: {sorted(served)}")
    folder = cfg.dir or data_dir
    if not folder:
        raise UsageError(
            "[insights] enabled needs a place for the question log: set [insights] dir, or give `ragsieve serve` a --data-dir"
        )
    embedders: dict[str, Embed] = {name: _embedder(live) for name, live in registry.orchestrators.items()}
    log = QuestionLog(
        Path(folder) / FILE_NAME, retention_days=cfg.retention_days, clock=clock, embedders=embedders, max_rows=cfg.max_rows
    )
    return InsightsHook(log, registry.config, served)


def _embedder(live: Any) -> Embed:
    """The index's own encoder (of its current generation), as the question log's writer calls it."""

    def embed(texts: list[str]):
        return live.index.embedder.embed(texts)

    return embed


def surface_of_page(via: str) -> Surface:
    """The chat page (`via` "page") or a widget (`widget:<key>`)."""
    return Surface.CHAT_PAGE if via == "page" else Surface.WIDGET
