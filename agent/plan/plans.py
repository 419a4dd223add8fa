"""Shipped plans: each lists its steps' transitions, keyed by each step's outcome type (pydantic-graph style:
`Expand.on({"grew": Judge, ...})`, checked by mypy); a plan runs the steps it names. A config may
add or override plans by name (`[plans.NAME]`, a `PlanSpec`): those run steps of `STEPS`, every step there is."""

from __future__ import annotations

from typing import Any

from ragsieve.agent.config import Config
from ragsieve.agent.core.step import END, Step
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.runner import Plan, validate_plan
from ragsieve.agent.steps.answer import Answer
from ragsieve.agent.steps.conformal import Conformal
from ragsieve.agent.steps.draft import Draft
from ragsieve.agent.steps.expand import Expand
from ragsieve.agent.steps.fallback import Fallback
from ragsieve.agent.steps.judge import Judge
from ragsieve.agent.steps.outliers import Outliers
from ragsieve.agent.steps.rerank import Rerank
from ragsieve.agent.steps.retrieve import Retrieve
from ragsieve.agent.steps.segments import Segments
from ragsieve.agent.steps.validate import Validate

# every step a plan may name, by name: an explicit list, not a registry filled on import
STEPS: dict[str, type[Step[Any, Any]]] = {
    step.name: step
    for step in (Retrieve, Rerank, Judge, Expand, Conformal, Outliers, Segments, Draft, Answer, Validate, Fallback)
}

FULL = (  # the card's pipeline: every stage
    Retrieve.on({"next": Judge}),
    Judge.on({"next": Expand}),
    Expand.on({"grew": Judge, "converged": Conformal}),
    Conformal.on({"next": Outliers}),
    Outliers.on({"next": Segments}),
    Segments.on({"next": Answer}),
    Answer.on({"next": Validate}),
    Validate.on({"resolved": END, "unresolved": Fallback, "exhausted": END}),
    Fallback.on({"next": Conformal, "unchanged": END}),  # unchanged: nothing added, the answer stands
)

BUILTIN_PLANS: dict[str, Plan] = {
    "fast": Plan.of(Retrieve, Retrieve.on({"next": Answer}), Answer.on({"next": END})),
    # every answer is written from the (filtered) context and the last answer is validated
    "agentic": Plan.of(
        Retrieve,
        Retrieve.on({"next": Judge}),
        Judge.on({"next": Expand}),
        Expand.on({"grew": Judge, "converged": Answer}),
        Answer.on({"next": Validate}),
        Validate.on({"resolved": END, "unresolved": Fallback, "exhausted": END}),
        Fallback.on({"next": Answer, "unchanged": END}),
    ),
    "full": Plan.of(Retrieve, *FULL),
    # retrieve, then a cross-encoder (or /rerank endpoint) re-scores the pool: needs [rerank] provider
    "fast+rerank": Plan.of(Retrieve, Retrieve.on({"next": Rerank}), Rerank.on({"next": Answer}), Answer.on({"next": END})),
    "full+rerank": Plan.of(Retrieve, Retrieve.on({"next": Rerank}), *FULL[1:], Rerank.on({"next": Judge})),
}
for _name, _plan in BUILTIN_PLANS.items():  # mypy refuses an unmapped outcome; reachability is checked here
    validate_plan(_name, _plan)


def get_plan(name: str, config: Config) -> Plan:
    """The plan `name`: the config's when it defines one by that name (over any step of `STEPS`), else a shipped
    one; validated against `config` before any call."""
    if name in config.plans:
        plan = Plan(tuple(STEPS.values()), config.plans[name])
    elif name in BUILTIN_PLANS:
        plan = BUILTIN_PLANS[name]
    else:
        raise UsageError(f"unknown plan {name!r}: choose one of {', '.join(plan_names(config))}")
    validate_plan(name, plan, config)
    return plan


def plan_names(config: Config) -> list[str]:
    return sorted({**BUILTIN_PLANS, **config.plans})


def usable_plans(config: Config) -> list[str]:
    """The plans this configuration can run (a `+rerank` plan needs a reranker that loads)."""
    usable = []
    for name in plan_names(config):
        try:
            get_plan(name, config)
        except UsageError:
            continue
        usable.append(name)
    return usable
