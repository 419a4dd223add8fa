"""Shipped plans: each lists the step classes it runs and its transitions (pydantic-graph style). A config may
add or override plans by name (`[plans.NAME]`, a `PlanSpec`): those run steps of `STEPS`, every step there is."""
from __future__ import annotations

from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.runner import END, Plan, Step, validate_plan
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
STEPS: dict[str, type[Step]] = {step.name: step for step in (
    Retrieve, Rerank, Judge, Expand, Conformal, Outliers, Segments, Draft, Answer, Validate, Fallback)}

FULL = {  # the card's pipeline: every stage
    "retrieve": {"next": "judge"},
    "judge": {"next": "expand"},
    "expand": {"grew": "judge", "converged": "conformal"},
    "conformal": {"next": "outliers"},
    "outliers": {"next": "segments"},
    "segments": {"next": "answer"},
    "answer": {"next": "validate"},
    "validate": {"resolved": END, "unresolved": "fallback", "exhausted": END},
    "fallback": {"next": "conformal"},
}

FULL_STEPS = (Retrieve, Judge, Expand, Conformal, Outliers, Segments, Answer, Validate, Fallback)

BUILTIN_PLANS: dict[str, Plan] = {
    "fast": Plan((Retrieve, Answer), PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "answer"},
        "answer": {"next": END},
    })),
    # every answer is written from the (filtered) context and the last answer is validated
    "agentic": Plan((Retrieve, Judge, Expand, Answer, Validate, Fallback), PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "judge"},
        "judge": {"next": "expand"},
        "expand": {"grew": "judge", "converged": "answer"},
        "answer": {"next": "validate"},
        "validate": {"resolved": END, "unresolved": "fallback", "exhausted": END},
        "fallback": {"next": "answer"},
    })),
    "full": Plan(FULL_STEPS, PlanSpec(start="retrieve", transitions=FULL)),
    # retrieve, then a cross-encoder (or /rerank endpoint) re-scores the pool: needs [rerank] provider
    "fast+rerank": Plan((Retrieve, Rerank, Answer), PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "rerank"},
        "rerank": {"next": "answer"},
        "answer": {"next": END},
    })),
    "full+rerank": Plan((Rerank, *FULL_STEPS), PlanSpec(start="retrieve", transitions={
        **FULL, "retrieve": {"next": "rerank"}, "rerank": {"next": "judge"}})),
}


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
