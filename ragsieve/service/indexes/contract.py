"""What the app, MCP, the documents API and the routes ask of the served indexes: `Registry`, a protocol that
`IndexRegistry` implements, so a front end types its `registry` and never probes it (`hasattr`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from ragsieve.agent.config import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.service.indexes.live import LiveOrchestrator

if TYPE_CHECKING:
    from ragsieve.insights.record import Surface
    from ragsieve.service.common.insights_hook import InsightsHook
    from ragsieve.service.common.jobs import Logged


class Registry(Protocol):
    """The indexes one server answers from, sharing one LLM (`ragsieve.service.indexes.registry`)."""

    config: Config
    orchestrators: dict[str, LiveOrchestrator]
    plans: list[str]
    served: set[str]  # the indexes given at start; the others are vector stores made over HTTP
    store_name: Callable[[str], str | None]
    insights: InsightsHook | None
    warming: bool
    llm_error: str | None

    def add(self, name: str, folder: Path) -> None: ...
    def remove(self, name: str) -> None: ...
    def watch(self, interval_s: float = 1.0) -> None: ...
    def shared_llm(self) -> LLM: ...
    @property
    def llm_ready(self) -> bool: ...
    def index_ready(self, name: str) -> bool: ...
    def warm_indexes(self) -> None: ...
    def default_index(self, allowed: list[str]) -> str | None: ...
    def model_ids(self, names: list[str] | None = None) -> list[str]: ...
    def resolve(self, model: str) -> tuple[str, str | None]: ...
    def logged(self, name: str, surface: Surface) -> Logged | None: ...
    def close(self) -> None: ...
