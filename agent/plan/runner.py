"""The state machine: follow a plan's transitions step by step, tracing each one.

A step (`ragsieve.agent.core.step`: pydantic-graph style) mutates the
serialisable `RunState` and returns a `StepResult` whose `outcome` the plan
maps to the next step, or to `END`. A `Plan` lists its step classes
explicitly (the shipped plans: `ragsieve.agent.plan.plans`); nothing
registers itself on import.

`validate_plan` refuses, before any call, a plan that could fail or waste
calls: unknown steps or outcomes, an outcome with no transition, a step that
cannot be reached from `start` or from which `end` cannot be reached, a path
to `end` that skips the `answer` step, and step settings the steps would
refuse (each step's `check_config`). When the question's LLM budget
(deadline, calls, tokens) runs out, the plan stops at once with the best
answer so far (the answer, else the last draft), marked in `state.stopped`
and in a `stopped` trace event.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.core.state import RunState, TraceEvent
from ragsieve.agent.core.step import END, Deps, Edges, End, Step, StepResult
from ragsieve.agent.errors import BudgetExceeded, UsageError
from ragsieve.agent.plan.traced import step_span
from ragsieve.tools.index.backend import RoundTrips

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """A runnable plan, pydantic-graph style: the step classes it runs, listed explicitly (no registry), and its
    transitions (`PlanSpec`: the start and, per step name, where each outcome leads)."""

    steps: tuple[type[Step[Any, Any]], ...]
    spec: PlanSpec  # the plan as data: targets are step names, and "end"

    def __post_init__(self) -> None:
        for step in self.steps:
            if not step.name:
                raise ValueError(f"{step.__name__} has no name")

    @classmethod
    def of(cls, start: type[Step[Any, Any]], *edges: Edges) -> Plan:
        """A plan from typed edges (`Step.on`): it runs the steps that have edges, from `start`."""
        return cls(
            tuple(e.step for e in edges),
            PlanSpec(
                start=start.name,
                transitions={e.step.name: {o: END.value if t is END else t.name for o, t in e.targets.items()} for e in edges},
            ),
        )

    @property
    def start(self) -> str:
        return self.spec.start

    @property
    def transitions(self) -> dict[str, dict[str, str | End]]:
        """Per step name, where each outcome leads: a step name, or `END`."""
        return {
            step: {o: END if t == END.value else t for o, t in edges.items()} for step, edges in self.spec.transitions.items()
        }

    @property
    def by_name(self) -> dict[str, type[Step[Any, Any]]]:
        return {step.name: step for step in self.steps}


def validate_plan(name: str, plan: Plan, config: Config | None = None) -> None:
    """Refuse a plan that is not a complete, reachable state machine ending through `answer`."""
    known = plan.by_name
    if plan.start not in known:
        raise UsageError(f"plan {name!r}: unknown start step {plan.start!r} (known: {sorted(known)})")
    for step, edges in plan.transitions.items():
        if step not in known:
            raise UsageError(f"plan {name!r}: unknown step {step!r} (known: {sorted(known)})")
        for outcome, target in edges.items():
            if outcome not in known[step].outcomes:
                raise UsageError(f"plan {name!r}: step {step!r} has no outcome {outcome!r} ({known[step].outcomes})")
            if target is not END and target not in known:
                raise UsageError(f"plan {name!r}: {step!r} leads to unknown step {target!r}")
    reached = _reachable(plan, plan.start, skip=None)
    reachable = {s for s in reached if isinstance(s, str)}  # the steps, without END
    for step in sorted(reachable):
        missing = [o for o in known[step].outcomes if o not in plan.transitions.get(step, {})]
        if missing:
            raise UsageError(
                f"plan {name!r}: step {step!r} has no transition for outcome(s) {missing}: "
                f"the run would stop there after paying for it"
            )
    unreachable = sorted(set(plan.transitions) - reachable)
    if unreachable:
        raise UsageError(f"plan {name!r}: step(s) {unreachable} cannot be reached from start {plan.start!r}")
    dead = sorted(s for s in reachable if END not in _reachable(plan, s, skip=None))
    if dead:
        raise UsageError(f"plan {name!r}: from step(s) {dead} the run can never reach 'end'")
    if END in _reachable(plan, plan.start, skip="answer"):
        raise UsageError(f"plan {name!r}: a path reaches 'end' without the 'answer' step (the reply would be empty)")
    if config is not None:
        for step in sorted(reachable):
            try:
                known[step].check_config(config)
            except (UsageError, ValueError) as exc:
                raise UsageError(f"plan {name!r}: step {step!r} refuses its settings: {exc}") from None


def _reachable(plan: Plan, start: str, skip: str | None) -> set[str | End]:
    """Steps (and END) reachable from `start`, never passing through `skip`."""
    seen: set[str | End] = set()
    todo: list[str | End] = [start] if start != skip else []
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node is END:
            continue
        todo.extend(t for t in plan.transitions.get(node, {}).values() if t != skip and t not in seen)
    return seen


def run_plan(plan: Plan, state: RunState, deps: Deps, max_steps: int) -> RunState:
    """Run from `plan.start` until a transition reaches END, the budget is spent or `max_steps` is spent.

    When the step bound is hit before an answer exists, the `answer` step runs
    once so the caller still gets a (traced) answer.
    """
    current: str | End = plan.start
    # the judge's first-round order check may wait for the next round's pass when judge and expand loop
    loops = plan.transitions
    state.loop.order_deferrable = (
        loops.get("judge", {}).get("next") == "expand" and loops.get("expand", {}).get("grew") == "judge"
    )
    while not isinstance(current, End):
        if _budget_spent(deps):
            _stop_on_budget(current, state, deps)
            break
        if state.steps_taken >= max_steps:
            state.stopped = f"max_steps={max_steps} reached before {current!r}"
            if state.answer is None and current != "answer" and "answer" in plan.by_name:
                try:
                    _run_one(plan, "answer", state, deps)
                except BudgetExceeded:
                    _stop_on_budget("answer", state, deps)
            break
        try:
            result = _run_one(plan, current, state, deps)
        except BudgetExceeded:
            _stop_on_budget(current, state, deps)
            break
        edges = plan.transitions.get(current, {})
        if result.outcome not in edges:
            raise UsageError(f"plan {state.plan!r}: no transition for {current!r} outcome {result.outcome!r}")
        current = edges[result.outcome]
    return state


def _budget_spent(deps: Deps) -> bool:
    return deps.llm is not None and deps.llm.budget.spent()


def _stop_on_budget(at: str, state: RunState, deps: Deps) -> None:
    """End the plan with the best answer so far (the answer, else the last draft, else the closest passages
    retrieved, marked as not an answer), marked and traced."""
    reason = (deps.llm.budget.exhausted if deps.llm is not None else None) or "LLM budget spent"
    if state.answer is None and state.draft is not None:
        state.answer = state.draft
        state.citations = [c.model_copy() for c in state.draft_citations]
        best = "last draft"
    elif state.answer is None and (state.context or state.pool):  # never empty-handed: what was retrieved
        from ragsieve.agent.answer.also_retrieved import STOPPED, with_also_retrieved
        from ragsieve.agent.answer.answering import abstention_answer

        hits = state.context or sorted(state.pool.values(), key=lambda h: -(h.score or 0.0))
        listed = deps.config.abstention.passages
        state.answer, state.citations = with_also_retrieved(
            *abstention_answer(hits, max(1, listed), head=STOPPED), hits, deps.config.abstention.also_retrieved
        )
        best = "closest passages"
    else:
        best = "answer" if state.answer is not None else "none"
    state.stopped = f"budget: {reason} (at step {at!r}; best answer so far: {best})"
    state.trace.append(TraceEvent(step=at, outcome="stopped", summary={"reason": reason, "best_answer": best}))


@step_span  # the step's span, from the event appended here (docs/tracing.md)
def _run_one(plan: Plan, name: str, state: RunState, deps: Deps) -> StepResult[Any]:
    step = plan.by_name[name]()
    before = deps.llm.meter.snapshot() if deps.llm is not None else None
    counter = deps.index if isinstance(deps.index, RoundTrips) else None  # a remote backend counts requests
    trips_before = counter.round_trips() if counter is not None else None
    started = time.perf_counter()
    result = step.run(state, deps)
    duration = time.perf_counter() - started
    usage = deps.llm.meter.snapshot().minus(before) if deps.llm is not None and before is not None else None
    summary = (
        result.summary
        if counter is None or trips_before is None
        else {**result.summary_dict(), "index_round_trips": counter.round_trips() - trips_before}
    )
    event = TraceEvent(step=name, outcome=result.outcome, summary=summary, duration_s=round(duration, 4))
    if usage is not None:
        event.usage = usage
    state.trace.append(event)
    state.steps_taken += 1
    deps.emit("step", {"step": name, "outcome": result.outcome, "duration_s": event.duration_s, "summary": result.summary_dict()})
    log.debug("step %s -> %s in %.3fs", name, result.outcome, duration)
    return result
