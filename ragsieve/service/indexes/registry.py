"""The indexes one server answers from, sharing one LLM; model ids `index` and `index:plan`."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ragsieve.agent.config import Config
from ragsieve.agent.errors import IndexMissingError, UsageError
from ragsieve.agent.llm.bounded import BoundedChat
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.plan.plans import usable_plans
from ragsieve.service.indexes.live import LiveOrchestrator, Watcher

if TYPE_CHECKING:
    from ragsieve.insights.record import Surface
    from ragsieve.service.common.insights_hook import InsightsHook
    from ragsieve.service.common.jobs import Logged

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def parse_index_specs(specs: list[str]) -> dict[str, Path]:
    """`NAME=DIR` (or a bare DIR, named after its folder) -> {name: dir}; names unique and URL-safe."""
    out: dict[str, Path] = {}
    for spec in specs:
        name, sep, folder = spec.partition("=")
        if not sep:
            folder, name = spec, Path(spec).resolve().name.lstrip(".") or "index"
        if not _NAME.match(name) or ":" in name:
            raise UsageError(f"invalid index name {name!r}: letters, digits, '_', '.', '-' (no ':'), up to 64")
        if name in out:
            raise UsageError(f"index name {name!r} given twice")
        if name == "ragsieve-passthrough":  # the model id of the LLM without retrieval (service.frontend_tasks)
            raise UsageError("the index name 'ragsieve-passthrough' is reserved; choose another")
        out[name] = Path(folder)
    if not out:
        raise UsageError("give at least one index: --index NAME=DIR")
    return out


class IndexRegistry:
    """Opens every index at start-up (a missing index is refused then, not at the first question)."""

    def __init__(self, indexes: dict[str, Path], config: Config, *, llm: LLM | None = None, llm_parallel: int = 4):
        from ragsieve.agent.orchestrator import Orchestrator

        self.config = config
        self.llm_parallel = llm_parallel
        self._llm = llm
        self._close_llm: Callable[[], None] | None = None
        self._llm_lock = threading.Lock()
        self.llm_error: str | None = None
        if llm is not None:
            llm.chat = BoundedChat(llm.chat, llm_parallel)
        self.orchestrators: dict[str, LiveOrchestrator] = {}
        self._watcher: Watcher | None = None
        self.warming = False  # `warm_indexes` runs at start-up: /readyz waits for it (else every index is ready)
        self.warmed: set[str] = set()
        self.insights: InsightsHook | None = None  # the question log's hook (`ragsieve.service.common.insights_hook`), when on
        self._opener = lambda folder: LiveOrchestrator(
            folder, lambda embedder: Orchestrator.open(folder, config, llm_factory=self.shared_llm, embedder=embedder)
        )
        try:
            for name, folder in indexes.items():
                try:
                    self.add(name, folder)
                except IndexMissingError as exc:  # one line naming the index the user gave, exit code 2
                    raise IndexMissingError(f"index {name!r}: {exc}") from None
        except BaseException:
            self.close()
            raise
        self.plans = usable_plans(config)  # a +rerank plan is offered when its reranker loads
        self.served = set(indexes)  # the indexes given at start; the others are vector stores made over HTTP
        self.store_name: Callable[[str], str | None] = lambda store_id: None  # set by the documents API

    def add(self, name: str, folder: Path) -> None:
        """Serve one more index (a vector store created over HTTP); it follows its new generations."""
        self.orchestrators[name] = self._opener(Path(folder))

    def remove(self, name: str) -> None:
        live = self.orchestrators.pop(name, None)
        if live is not None:
            live.close()

    def watch(self, interval_s: float = 1.0) -> None:
        """Look for newly published generations in the background (`ragsieve.service.indexes.live`)."""
        if self._watcher is None:
            self._watcher = Watcher(lambda: list(self.orchestrators.values()), interval_s).start()

    def shared_llm(self) -> LLM:
        with self._llm_lock:
            if self._llm is None:
                from ragsieve.agent.llm.factory import open_llm

                cfg = self.config.llm.model_copy(update={"parallel": self.llm_parallel})
                try:
                    self._llm, self._close_llm = open_llm(cfg)
                except Exception as exc:
                    self.llm_error = f"{type(exc).__name__}: {exc}"
                    raise
                self._llm.chat = BoundedChat(self._llm.chat, self.llm_parallel)
                self.llm_error = None
            return self._llm

    @property
    def llm_ready(self) -> bool:
        return self._llm is not None

    def index_ready(self, name: str) -> bool:
        """The index answers, and (when warming was asked for) its first search will not load anything."""
        return name in self.orchestrators and (not self.warming or name in self.warmed)

    def warm_indexes(self) -> None:
        """Load what a first search loads (the query encoder, the BM25 and vector structures) by running one,
        so that the first real search after /readyz says ready is not the one that pays for it."""
        for name, live in list(self.orchestrators.items()):
            try:
                index = live.index
                vector = index.embed_query("ragsieve warm-up")
                index.bm25.search("ragsieve warm-up", k=1)
                index.dense.search(vector, k=1)
            except Exception as exc:  # an index that cannot search says so at its first question, as before
                log.warning("warming index %s failed: %s", name, exc)
            self.warmed.add(name)

    def default_index(self, allowed: list[str]) -> str | None:
        """The index a call that names none uses (`/v1/ask`, the chat page's API, MCP): the only index served
        with `--index` among `allowed` (those the caller may read). Vector stores made over the documents API never
        count, so someone's upload does not change what a client's unnamed calls reach. None when there is not
        exactly one."""
        served = [n for n in allowed if n in self.served]
        return served[0] if len(served) == 1 else None

    def model_ids(self, names: list[str] | None = None) -> list[str]:
        ids = []
        for name in sorted(names if names is not None else self.orchestrators):
            ids.append(name)
            ids.extend(f"{name}:{plan}" for plan in self.plans)
        return ids

    def resolve(self, model: str) -> tuple[str, str | None]:
        """`index` or `index:plan` -> (index, plan); KeyError when either is unknown."""
        name, _, plan = model.partition(":")
        if name not in self.orchestrators or (plan and plan not in self.plans):
            raise KeyError(model)
        return name, plan or None

    def logged(self, name: str, surface: Surface) -> Logged | None:
        """Where a question to index `name` is logged (`jobs.Logged`), or None when insights are off for it."""
        from ragsieve.service.common.jobs import Logged

        hook = self.insights
        return Logged(hook, name, surface) if hook is not None and hook.logs(name) else None

    def close(self) -> None:
        hook = self.insights
        if hook is not None:
            self.insights = None
            hook.close()
        if self._watcher is not None:
            self._watcher.stop()
        for orch in self.orchestrators.values():
            try:
                orch.close()
            except Exception:  # pragma: no cover - closing is best effort
                log.exception("closing an index failed")
        if self._close_llm is not None:
            self._close_llm()
            self._close_llm = None
