"""`Config`, the whole configuration: every section, the plan, and `Config.load` from a TOML file."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field, ValidationError

from ragsieve.agent.config.base import _Section
from ragsieve.agent.config.filters import AbstentionConfig, ConformalConfig, OutlierConfig, SegmentConfig
from ragsieve.agent.config.index import IndexConfig, RetrievalConfig
from ragsieve.agent.config.llm import BudgetConfig, LLMConfig
from ragsieve.agent.config.loop import FallbackConfig, LoopConfig, RerankConfig
from ragsieve.agent.config.tracing import TracingConfig
from ragsieve.agent.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

PROMPT_RESERVE = 1024  # tokens of the answer prompt besides the passages (template, question, instructions)


class InsightsConfig(_Section):
    """The question log behind `ragsieve insights` and `/insights` (ragsieve.insights). Off by default;
    texts are redacted (e-mails, phone numbers, tokens, key-like strings) before anything is written."""

    enabled: bool = False
    indexes: list[str] = Field(default_factory=list)  # the served indexes logged; empty: every one
    retention_days: float = Field(default=90.0, gt=0, le=3650)  # older rows are deleted
    # and beyond this many rows the oldest are (a row: the redacted question, citations, a float16 embedding)
    max_rows: int = Field(default=1_000_000, ge=100, le=100_000_000)
    store_answers: bool = False  # also keep the (redacted) answer text
    # average cosine distance under which questions share a topic (average linkage); 0.75 joins MiniLM paraphrases
    # of one missing topic (similarities 0.15-0.6) and keeps two unrelated topics apart (tests/service/test_insights.py)
    group_distance: float = Field(default=0.75, gt=0.0, lt=2.0)
    dir: str | None = None  # where insights.sqlite3 lives (None: the server's --data-dir)

    def logs(self, index: str) -> bool:
        return self.enabled and (not self.indexes or index in self.indexes)


class PlanSpec(_Section):
    """A plan as data: the first step and, per step, where each outcome leads ("end" stops)."""

    start: str
    transitions: dict[str, dict[str, str]]


class Config(_Section):
    index: IndexConfig = Field(default_factory=IndexConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    conformal: ConformalConfig = Field(default_factory=ConformalConfig)
    outliers: OutlierConfig = Field(default_factory=OutlierConfig)
    abstention: AbstentionConfig = Field(default_factory=AbstentionConfig)
    segments: SegmentConfig = Field(default_factory=SegmentConfig)
    insights: InsightsConfig = Field(default_factory=InsightsConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)  # OpenTelemetry spans (docs/tracing.md)
    plan: str = "fast"
    max_steps: int = Field(40, ge=1, le=1000)
    plans: dict[str, PlanSpec] = Field(default_factory=dict)

    def context_budget(self) -> int:
        """The context's token budget: `loop.context_tokens`, or the model's window less the reply and prompt."""
        if self.loop.context_tokens is not None:
            return self.loop.context_tokens
        window = self.llm.context_window or self.llm.n_ctx
        return max(100, window - self.llm.max_tokens - PROMPT_RESERVE)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Config":
        if path is None:
            return cls()
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"config file not found: {p}")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"config file {p} is not valid TOML: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:  # one line: `llm.n_threads: Input should be ... (got 0)`
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'config'}: {err['msg']} (got {err.get('input')!r:.60})"
                for err in exc.errors()
            )
            raise UsageError(f"config file {p}: {problems}") from None
        except UsageError as exc:
            raise UsageError(f"config file {p}: {exc}") from exc
