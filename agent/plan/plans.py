"""Shipped plans, as data. A config may add or override plans by name."""
from __future__ import annotations

import ragsieve.agent.steps  # noqa: F401  (registers the steps)
from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.runner import END, validate_plan

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

BUILTIN_PLANS: dict[str, PlanSpec] = {
    "fast": PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "answer"},
        "answer": {"next": END},
    }),
    # every answer is written from the (filtered) context and the last answer is validated
    "agentic": PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "judge"},
        "judge": {"next": "expand"},
        "expand": {"grew": "judge", "converged": "answer"},
        "answer": {"next": "validate"},
        "validate": {"resolved": END, "unresolved": "fallback", "exhausted": END},
        "fallback": {"next": "answer"},
    }),
    "full": PlanSpec(start="retrieve", transitions=FULL),
    # retrieve, then a cross-encoder (or /rerank endpoint) re-scores the pool: needs [rerank] provider
    "fast+rerank": PlanSpec(start="retrieve", transitions={
        "retrieve": {"next": "rerank"},
        "rerank": {"next": "answer"},
        "answer": {"next": END},
    }),
    "full+rerank": PlanSpec(start="retrieve", transitions={
        **FULL, "retrieve": {"next": "rerank"}, "rerank": {"next": "judge"}}),
}


def get_plan(name: str, config: Config) -> PlanSpec:
    plans = {**BUILTIN_PLANS, **config.plans}
    if name not in plans:
        raise UsageError(f"unknown plan {name!r}: choose one of {', '.join(sorted(plans))}")
    plan = plans[name]
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
