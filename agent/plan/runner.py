"""The state machine: follow a plan's transitions step by step, tracing each one.

A step (pydantic-graph style) is a small class with one `run(state, deps)`
method that mutates the serialisable `RunState` and returns a `StepResult`
whose `outcome` the plan maps to the next step. Clients, indexes and
templates are dependencies (`Deps`), never part of the state.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.state import RunState, TraceEvent

log = logging.getLogger(__name__)

END = "end"


@dataclass
class StepResult:
    outcome: str = "next"
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Deps:
    """What steps use but do not own. `llm` is an `agent.llm.LLM` (metered)."""

    config: Config
    retriever: Any
    index: Any
    llm: Any
    prompts: Any
    extras: dict[str, Any] = field(default_factory=dict)


class Step:
    """Base class: subclasses set `name` and implement `run`."""

    name: ClassVar[str] = ""
    outcomes: ClassVar[tuple[str, ...]] = ("next",)

    def run(self, state: RunState, deps: Deps) -> StepResult:  # pragma: no cover - interface
        raise NotImplementedError


STEPS: dict[str, type[Step]] = {}


def register(cls: type[Step]) -> type[Step]:
    """Class decorator adding a step to the registry under its `name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    STEPS[cls.name] = cls
    return cls


def validate_plan(name: str, plan: PlanSpec) -> None:
    """Refuse a plan naming unknown steps or outcomes a step cannot produce."""
    if plan.start not in STEPS:
        raise UsageError(f"plan {name!r}: unknown start step {plan.start!r} (known: {sorted(STEPS)})")
    for step, edges in plan.transitions.items():
        if step not in STEPS:
            raise UsageError(f"plan {name!r}: unknown step {step!r} (known: {sorted(STEPS)})")
        for outcome, target in edges.items():
            if outcome not in STEPS[step].outcomes:
                raise UsageError(f"plan {name!r}: step {step!r} has no outcome {outcome!r} ({STEPS[step].outcomes})")
            if target != END and target not in STEPS:
                raise UsageError(f"plan {name!r}: {step!r} leads to unknown step {target!r}")


def run_plan(plan: PlanSpec, state: RunState, deps: Deps, max_steps: int) -> RunState:
    """Run from `plan.start` until a transition reaches END or `max_steps` is spent.

    When the step bound is hit before an answer exists, the `answer` step runs
    once so the caller still gets a (traced) answer.
    """
    current = plan.start
    while current != END:
        if state.steps_taken >= max_steps:
            state.stopped = f"max_steps={max_steps} reached before {current!r}"
            if state.answer is None and current != "answer" and "answer" in STEPS:
                _run_one("answer", state, deps)
            break
        result = _run_one(current, state, deps)
        edges = plan.transitions.get(current, {})
        if result.outcome not in edges:
            raise UsageError(f"plan {state.plan!r}: no transition for {current!r} outcome {result.outcome!r}")
        current = edges[result.outcome]
    return state


def _run_one(name: str, state: RunState, deps: Deps) -> StepResult:
    step = STEPS[name]()
    before = deps.llm.meter.snapshot() if deps.llm is not None else None
    started = time.perf_counter()
    result = step.run(state, deps)
    duration = time.perf_counter() - started
    usage = deps.llm.meter.snapshot().minus(before) if before is not None else None
    event = TraceEvent(step=name, outcome=result.outcome, summary=result.summary, duration_s=round(duration, 4))
    if usage is not None:
        event.usage = usage
    state.trace.append(event)
    state.steps_taken += 1
    log.debug("step %s -> %s in %.3fs", name, result.outcome, duration)
    return result
