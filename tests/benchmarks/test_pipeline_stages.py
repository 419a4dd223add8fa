"""Per-stage gold recall from one `full` run (`benchmarks/pipeline_rows.stage_recalls`): the context after each
filter step's first run is read from the trace, and it is the context the plan stopping after that step
ends with, so the stage ablation needs no extra run per stage (the embedded judge's costs minutes a question)."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.pipeline import plans as pipeline_plans  # noqa: E402
from benchmarks.pipeline.rows import stage_contexts, stage_recalls, summarise  # noqa: E402
from ragsieve.agent.core.state import TraceEvent  # noqa: E402
from ragsieve.testing import FakeChat  # noqa: E402
from tests.core.test_full_plan import QUESTION, calibrated_index, fake_model  # noqa: E402,F401  (the fixture is used by name)


def _event(step, summary, outcome="next"):
    return TraceEvent(step=step, outcome=outcome, summary=summary)


PLANTED = [  # the judge found gold g, the conformal step dropped it, a fallback pass brought it back
    _event("retrieve", {"hits": 5}),
    _event("expand", {"new_candidates": ["g#0"]}, outcome="grew"),
    _event("expand", {"context": ["g#0", "x#0"]}, outcome="converged"),
    _event("conformal", {"status": "applied", "kept": ["x#0"], "removed": ["g#0"]}),
    _event("outliers", {"status": "disabled", "kept": ["x#0"], "removed": []}),
    _event("segments", {"status": "applied", "kept": ["x#0"], "context": ["x#0", "x#1"]}),
    _event("answer", {"context": ["x#0", "x#1"]}),
    _event("validate", {"resolved": False}, outcome="unresolved"),
    _event("fallback", {"added": ["h#0"]}),
    _event("conformal", {"status": "applied", "kept": ["g#0", "h#0"]}),
]


def _answer(trace, final):
    return SimpleNamespace(trace=trace, context=[SimpleNamespace(chunk_id=c) for c in final])


def test_stages_come_from_the_first_pass_and_a_disabled_step_is_not_a_stage():
    stages = stage_contexts(PLANTED)
    assert stages == {"+judge": ["g#0", "x#0"], "+conformal": ["x#0"], "+rse": ["x#0", "x#1"]}
    got = stage_recalls(_answer(PLANTED, ["g#0", "h#0"]), ["g", "h"], "hotpotqa")
    assert got["stages"] == {"+judge": 0.5, "+conformal": 0.0, "+rse": 0.0, "final": 1.0}
    assert got["stages_both"] == {"+judge": 0.0, "+conformal": 0.0, "+rse": 0.0, "final": 1.0}
    assert stage_recalls(_answer(PLANTED, ["g#0"]), [], "squad2") == {}  # unanswerable: no gold, no stages
    assert stage_recalls(_answer([_event("retrieve", {}), _event("answer", {})], ["g#0"]), ["g"], "squad2") == {}


def test_summary_averages_each_stage_over_the_answerable_rows_that_carry_it():
    def row(stages, impossible=False):
        return {
            "impossible": impossible,
            "gold_recall": stages["final"] if stages else None,
            "both_gold": None,
            "context_chunks": 2,
            "context_tokens": 10,
            "llm_calls": 3,
            "seconds": 1.0,
            "em": None,
            "f1": None,
            "abstained": False,
            **({"stages": stages} if stages else {}),
        }

    rows = [
        row({"+judge": 1.0, "+conformal": 0.0, "final": 1.0}),
        row({"+judge": 1.0, "+conformal": 1.0, "final": 0.0}),
        row(None, impossible=True),
    ]
    got = summarise(rows)
    assert got["stage_n"] == 2
    assert got["stage_gold_recall"] == {"+judge": 1.0, "+conformal": 0.5, "final": 0.5}
    assert "stage_both_gold" not in got


def test_one_full_run_gives_the_context_each_prefix_plan_ends_with(calibrated_index):  # noqa: F811 (the fixture)
    from ragsieve.agent.orchestrator import Orchestrator

    with Orchestrator.open(calibrated_index, pipeline_plans.config_for("full"), chat=FakeChat(default=fake_model)) as orch:
        full = orch.ask(QUESTION, plan="full")
        stages = stage_contexts(full.trace)
        assert list(stages) == ["+judge", "+conformal", "+rse"]  # GMM is off in the default settings
        assert len({tuple(ids) for ids in stages.values()}) > 1, stages  # some step changed the context here
        for plan in stages:
            prefix = orch.ask(QUESTION, plan=plan)
            assert [h.chunk_id for h in prefix.context] == stages[plan], plan


def test_stage_agreement_compares_each_prefix_plan_with_the_stage_inside_full():
    from benchmarks.pipeline.rows import stage_agreement

    def row(qid, recall, stages=None):
        return {"qid": qid, "gold_recall": recall, **({"stages": stages} if stages else {})}

    rows = {
        "full": [
            row("a", 1.0, {"+judge": 0.5, "+conformal": 1.0, "final": 1.0}),
            row("b", 0.0, {"+judge": 0.0, "+conformal": 0.0, "final": 0.0}),
            row("u", None),
        ],
        "+judge": [row("a", 0.5), row("b", 0.0), row("u", None)],
        "+conformal": [row("a", 0.5), row("b", 0.0)],
    }  # question a differs: counted, not hidden
    assert stage_agreement(rows) == {"+judge": {"questions": 2, "equal": 2}, "+conformal": {"questions": 2, "equal": 1}}
    assert stage_agreement({"full": rows["full"]}) == {}
