"""The public entry point: open an index, ask questions, get typed answers."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragsieve.agent.answer.conversation import Turn, rewrite_question
from ragsieve.agent.config import Config
from ragsieve.agent.core.caches import StepCaches
from ragsieve.agent.core.state import (
    RunState,
    TraceEvent,
)
from ragsieve.agent.core.step import Deps
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.agent.llm.chat import ChatModel
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.plan.plans import get_plan
from ragsieve.agent.plan.runner import run_plan
from ragsieve.agent.plan.traced import question_span
from ragsieve.agent.reply import Answer, answer_of, check_question
from ragsieve.tools.index.search.where import Where
from ragsieve.tools.types import Hit

if TYPE_CHECKING:  # loaded when an index is opened (`open`)
    from ragsieve.tools.index.backend import IndexBackend
    from ragsieve.tools.index.query.retriever import HybridRetriever

log = logging.getLogger(__name__)


class Orchestrator:
    """Holds the index, retriever, prompts and LLM; runs a plan per question.

    The LLM is opened lazily (the embedded server starts on the first question
    that needs it), so retrieval-only use never starts a model.
    """

    def __init__(
        self,
        index: IndexBackend,
        retriever: HybridRetriever,
        config: Config,
        *,
        llm: LLM | None = None,
        prompts: PromptRenderer | None = None,
        caches: StepCaches | None = None,
        llm_factory: Callable[[], LLM] | None = None,
    ) -> None:
        self.index = index
        self.retriever = retriever
        self.config = config
        self.prompts = prompts or PromptRenderer()
        self.caches = caches or StepCaches()  # what the steps reuse across this orchestrator's questions
        self._llm = llm
        self._llm_factory = llm_factory  # a shared LLM owned elsewhere (the service's, one for every index)
        self._close_llm: Callable[[], None] | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        index_dir: str | Path,
        config: Config | None = None,
        *,
        chat: ChatModel | None = None,
        llm: LLM | None = None,
        prompts: PromptRenderer | None = None,
        llm_factory: Callable[[], LLM] | None = None,
        embedder: Any = None,
    ) -> "Orchestrator":
        from ragsieve.tools.index.engines.open import open_index

        config = config or Config()
        # local, or the Milvus collection the index was published to; queries embedded on [index] device
        index = open_index(index_dir, embedder, device=config.index.device)
        retriever = build_retriever(index, config)
        if chat is not None and llm is None:
            llm = LLM(
                chat,
                max_tokens=config.llm.max_tokens,
                temperature=config.llm.temperature,
                max_prompt_tokens=config.llm.max_prompt_tokens,
            )
        return cls(index, retriever, config, llm=llm, prompts=prompts, llm_factory=llm_factory)

    @property
    def llm(self) -> LLM:
        with self._lock:
            if self._llm is None and self._llm_factory is not None:
                return self._llm_factory()
            if self._llm is None:
                from ragsieve.agent.llm.factory import open_llm

                self._llm, self._close_llm = open_llm(self.config.llm)
            return self._llm

    def retrieve(
        self, question: str, top_k: int | None = None, *, where: Where | None = None, ranking: str | None = None
    ) -> list[Hit]:
        """The fused first-stage hits; `where` restricts them by metadata (source, path prefix, language...);
        `ranking` (`hybrid`, `source-first`) overrides `retrieval.ranking` for this search."""
        question = check_question(question)
        config = self._config_for({"retrieval": {"ranking": ranking}}) if ranking is not None else self.config
        return self._retriever_for(config).with_filter(where).run(question, top_k=top_k or config.retrieval.top_k)

    @question_span  # one span per question, the trace of its steps (docs/tracing.md)
    def ask(
        self,
        question: str,
        *,
        plan: str | None = None,
        deadline_s: float | None = None,
        history: list[Turn] | None = None,
        instructions: str | None = None,
        overrides: dict[str, dict[str, Any]] | None = None,
        budget: QuestionBudget | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        on_token: Callable[[str], None] | None = None,
        answer_options: dict[str, Any] | None = None,
        where: Where | None = None,
    ) -> Answer:
        """Run a plan; `deadline_s` overrides `budget.deadline_s` for this question.

        `history` (earlier turns) makes the question a follow-up: it is rewritten into a stand-alone
        question first (traced as the `rewrite` event). `instructions` reach the answer call only.
        `overrides` are config sections for this question only (validated: a bad value is refused).
        `budget` lets the caller cancel the question (`budget.cancel()`); `on_event` / `on_token`
        receive step events and the answer's tokens as they happen. `where` (a metadata filter) restricts
        every search of the plan, the fallback's included, to the chunks it admits."""
        question = check_question(question)
        config = self._config_for(overrides)
        plan_name = plan or config.plan
        spec = get_plan(plan_name, config)
        base = self.llm  # started before the clock runs: an embedded model's start-up is not the question's
        if budget is None:
            b = config.budget
            budget = QuestionBudget(deadline_s if deadline_s is not None else b.deadline_s, b.llm_calls, b.tokens)
        llm = base.fork(budget=budget, templates=self.prompts.fingerprint())
        deps = Deps(
            config=config,
            retriever=self._retriever_for(config).with_filter(where),
            index=self.index,
            llm=llm,
            prompts=self.prompts,
            caches=self.caches,
            on_event=on_event,
            on_token=on_token,
            answer_options=dict(answer_options or {}),
        )
        state = RunState(question=question, plan=plan_name, instructions=instructions)
        narrowed = {} if where is None else where.model_dump(exclude_none=True, exclude={"readers"})
        if narrowed:  # the caller's access (`readers`) is not a note: it narrows silently, as a missing file would
            state.notes.append("searched only: " + ", ".join(f"{k}={v}" for k, v in narrowed.items()))
        if history:
            state.history = [{"role": t.role, "text": t.text} for t in history]
            self._rewrite(state, history, deps)
        run_plan(spec, state, deps, config.max_steps)
        return answer_of(state, llm.meter.snapshot())

    def _config_for(self, overrides: dict[str, dict[str, Any]] | None) -> Config:
        if not overrides:
            return self.config
        data = self.config.model_dump()
        for section, values in overrides.items():
            if section not in data or not isinstance(data[section], dict) or not isinstance(values, dict):
                raise UsageError(f"unknown setting section {section!r}")
            unknown = sorted(set(values) - set(data[section]))
            if unknown:
                raise UsageError(f"unknown setting(s) {section}.{', '.join(unknown)}")
            data[section] = {**data[section], **values}
        try:
            return Config.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"invalid setting: {exc}") from None

    def _retriever_for(self, config: Config) -> HybridRetriever:
        if config is self.config or config.retrieval == self.config.retrieval:
            return self.retriever
        return build_retriever(self.index, config)

    def _rewrite(self, state: RunState, history: list[Turn], deps: Deps) -> None:
        """A follow-up becomes a stand-alone question before retrieval (traced; `asked` keeps the user's words)."""
        llm = deps.need_llm()
        before = llm.meter.snapshot()
        started = time.perf_counter()
        rewritten, note = rewrite_question(state.question, history, llm, self.prompts)
        rewritten = check_question(rewritten) if rewritten.strip() else state.question
        summary = {"asked": state.question, "question": rewritten, "turns": len(history)}
        if note:
            summary["note"] = note
        state.trace.append(
            TraceEvent(
                step="rewrite",
                outcome="rewritten" if rewritten != state.question else "kept",
                summary=summary,
                duration_s=round(time.perf_counter() - started, 4),
                usage=llm.meter.snapshot().minus(before),
            )
        )
        deps.emit("step", {"step": "rewrite", "outcome": state.trace[-1].outcome, "summary": summary})
        state.asked, state.question = state.question, rewritten

    def close(self) -> None:
        if self._close_llm is not None:
            self._close_llm()
            self._close_llm = None
        self.index.close()

    def __enter__(self) -> "Orchestrator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_retriever(index: IndexBackend, config: Config) -> HybridRetriever:
    """The hybrid retriever the plans use over `index`, built from `config`'s `[retrieval]` section."""
    from ragsieve.tools.index.query.retriever import HybridRetriever

    r = config.retrieval
    return HybridRetriever(
        index,
        fusion=r.fusion,
        rrf_k=r.rrf_k,
        bm25_weight=r.bm25_weight,
        dense_weight=r.dense_weight,
        candidate_k=r.candidate_k,
        fusion_site=r.fusion_site,
        symbols=r.symbols,
        collapse=r.collapse,
        sections=r.sections,
        ranking=r.ranking,
    )
