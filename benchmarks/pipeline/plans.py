"""The stage ablation's plans and the config each runs under (`benchmarks/pipeline/main.py`).

Plans (cumulative): fast; +judge; +judge+fallback (the shipped `agentic` plan); +conformal, +gmm, +rse (each
stage added after the judge, no validation); full; full-R (full, with `retrieval.exclude_sparse`). `OVERRIDES`
(`--override`) apply to every plan; `COVERAGE_KINDS` are the score kinds whose final-context coverage is measured.
"""

from __future__ import annotations

import json

from ragsieve.agent.config import Config, PlanSpec

END = "end"
LOOP = {"retrieve": {"next": "judge"}, "judge": {"next": "expand"}}
VALIDATED = {"answer": {"next": "validate"}, "validate": {"resolved": END, "unresolved": "fallback", "exhausted": END}}


def _chain(*stages: str) -> dict:
    steps = ["expand", *stages, "answer"]
    edges = {**LOOP, "expand": {"grew": "judge", "converged": steps[1]}}
    for a, b in zip(steps[1:], steps[2:]):
        edges[a] = {"next": b}
    edges["answer"] = {"next": END}
    return edges


PLANS: dict[str, PlanSpec | None] = {
    "fast": None,
    "+judge": PlanSpec(start="retrieve", transitions=_chain()),
    "+judge+fallback": None,  # the shipped `agentic` plan
    "+conformal": PlanSpec(start="retrieve", transitions=_chain("conformal")),
    "+gmm": PlanSpec(start="retrieve", transitions=_chain("conformal", "outliers")),
    "+rse": PlanSpec(start="retrieve", transitions=_chain("conformal", "outliers", "segments")),
    "full": None,
    "full-R": None,  # `full` with retrieval.exclude_sparse
}
SHIPPED = {"fast": "fast", "+judge+fallback": "agentic", "full": "full", "full-R": "full"}
OVERRIDES: list[str] = []  # --override SECTION.FIELD=JSON, applied to every plan
COVERAGE_KINDS: list[str | None] = [None, "raw"]  # None: the calibrated kind; raw: CONFLARE's own score
COVERAGE_PLAN = PlanSpec(
    start="retrieve", transitions={"retrieve": {"next": "conformal"}, "conformal": {"next": "answer"}, "answer": {"next": END}}
)


def config_for(plan: str, alpha: float | None = None, kind: str | None = None, combine: str | None = None) -> Config:
    cfg = Config()
    cfg.plans = {k: v for k, v in PLANS.items() if v is not None} | {"coverage": COVERAGE_PLAN}
    cfg.loop = cfg.loop.model_copy(update={"judge_concurrency": 1, **({"combine": combine} if combine else {})})
    if plan == "full-R":
        cfg.retrieval = cfg.retrieval.model_copy(update={"exclude_sparse": True})
    for item in OVERRIDES:
        section, _, rest = item.partition(".")
        field, _, value = rest.partition("=")
        parsed = json.loads(value) if value not in ("", None) else None
        setattr(cfg, section, getattr(cfg, section).model_validate({**getattr(cfg, section).model_dump(), field: parsed}))
    if alpha is not None or kind is not None:
        cfg.conformal = cfg.conformal.model_copy(update={"alpha": alpha, "score_kind": kind})
    return cfg
