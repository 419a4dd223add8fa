"""The state machine: plans as data, traced steps, bounded runs."""

import pytest

from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import END, Deps, Step, StepResult
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.plan.plans import BUILTIN_PLANS, STEPS, get_plan, plan_names
from ragsieve.agent.plan.runner import Plan, run_plan, validate_plan
from ragsieve.agent.steps.answer import Answer
from ragsieve.testing import FakeChat


class _Loop(Step):
    name = "test_loop"
    outcomes = ("again", "done")

    def run(self, state, deps):
        state.notes.append(f"count {len(state.notes) + 1}")
        deps.llm.text([{"role": "user", "content": "hi"}])
        return StepResult("again" if len(state.notes) < 3 else "done", {"n": len(state.notes)})


class _Finish(Step):
    name = "test_finish"

    def run(self, state, deps):
        state.answer = "finished"
        return StepResult("next")


def _deps(chat=None):
    return Deps(config=Config(), retriever=None, index=None, llm=LLM(chat or FakeChat(default="ok")), prompts=None)


PLAN = Plan.of(_Loop, _Loop.on({"again": _Loop, "done": _Finish}), _Finish.on({"next": END}))


def test_trace_records_sequence_outcomes_and_usage():
    state = run_plan(PLAN, RunState(question="q", plan="t"), _deps(), max_steps=10)
    assert [e.step for e in state.trace] == ["test_loop"] * 3 + ["test_finish"]
    assert [e.outcome for e in state.trace] == ["again", "again", "done", "next"]
    assert [e.usage.calls for e in state.trace] == [1, 1, 1, 0]
    assert state.usage.calls == 3
    assert state.answer == "finished"


def test_max_steps_bounds_a_cycle_and_still_answers():
    from ragsieve.agent.llm.templates import PromptRenderer

    cyclic = Plan(
        (_Loop, Answer), PlanSpec(start="test_loop", transitions={"test_loop": {"again": "test_loop", "done": "test_loop"}})
    )
    deps = _deps(FakeChat(default="an answer"))
    deps.prompts = PromptRenderer()
    from ragsieve.tools.types import Chunk, Hit

    context = [Hit(chunk=Chunk(doc_id="d", chunk_index=0, text="some text", source="d"), row=0, score=1.0)]
    state = run_plan(cyclic, RunState(question="q", plan="t", context=context), deps, max_steps=5)
    assert [e.step for e in state.trace] == ["test_loop"] * 5 + ["answer"]
    assert "max_steps=5" in state.stopped
    assert state.answer == "an answer"


def test_missing_transition_is_an_error():
    plan = Plan((_Loop,), PlanSpec(start="test_loop", transitions={"test_loop": {"again": "test_loop"}}))
    with pytest.raises(UsageError, match="no transition for 'test_loop' outcome 'done'"):
        run_plan(plan, RunState(question="q", plan="t"), _deps(), max_steps=10)


def test_builtin_plans_validate():
    config = Config()
    assert {"fast", "agentic", "full", "fast+rerank", "full+rerank"} <= set(plan_names(config))
    for name in plan_names(config):
        if "rerank" in name:  # no reranker configured: refused before any call, saying how to configure one
            with pytest.raises(UsageError, match=r"step 'rerank' refuses its settings: no reranker is configured"):
                get_plan(name, config)
            continue
        plan = get_plan(name, config)
        assert plan.start in STEPS


def test_each_shipped_plan_lists_exactly_the_steps_it_runs():
    """A plan's explicit step classes are the steps its transitions name: none missing, none extra, and each
    one the catalogue's class of that name (the catalogue holds every step, named once)."""
    assert len(STEPS) == len(set(STEPS.values())) == 11
    for name, plan in BUILTIN_PLANS.items():
        named = set(plan.transitions) | {t for edges in plan.transitions.values() for t in edges.values()} - {END}
        assert set(plan.by_name) == named, name
        assert all(STEPS[step.name] is step for step in plan.steps), name


def test_a_step_class_without_a_name_is_refused():
    class Nameless(Step):
        pass

    with pytest.raises(ValueError, match="Nameless has no name"):
        Plan((Nameless,), PlanSpec(start="x", transitions={}))


def test_a_plan_runs_only_the_steps_it_lists():
    """No global registry: a plan naming a step it does not list is refused, whatever else was imported."""
    spec = PlanSpec(
        start="test_loop", transitions={"test_loop": {"again": "test_loop", "done": "answer"}, "answer": {"next": "end"}}
    )
    with pytest.raises(UsageError, match="leads to unknown step 'answer'"):
        validate_plan("mine", Plan((_Loop,), spec))
    validate_plan("mine", Plan((_Loop, Answer), spec))


def test_config_plans_are_validated():
    bad = Config(plans={"mine": PlanSpec(start="retrieve", transitions={"retrieve": {"next": "nowhere"}})})
    with pytest.raises(UsageError, match="unknown step 'nowhere'"):
        get_plan("mine", bad)
    with pytest.raises(UsageError, match="unknown plan 'zzz'"):
        get_plan("zzz", Config())
    wrong_outcome = Config(plans={"w": PlanSpec(start="retrieve", transitions={"retrieve": {"grew": "end"}})})
    with pytest.raises(UsageError, match="has no outcome 'grew'"):
        get_plan("w", wrong_outcome)


def test_state_is_serialisable():
    state = run_plan(PLAN, RunState(question="q", plan="t"), _deps(), max_steps=10)
    again = RunState.model_validate_json(state.model_dump_json())
    assert again == state


def test_config_refuses_unknown_modes_listing_valid_ones(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[retrieval]\nfusion = "borda"\n')
    with pytest.raises(UsageError, match="c.toml.*invalid fusion 'borda': choose one of rrf, weighted"):
        Config.load(path)
    with pytest.raises(UsageError, match="choose one of edges, rank"):
        Config.model_validate({"loop": {"context_order": "middle"}})
    with pytest.raises(UsageError, match="invalid rerank_model"):
        Config.model_validate({"fallback": {"rerank_model": "nope"}})
    assert Config.model_validate({"index": {"bm25_engine": "rank_bm25"}}).index.bm25_engine == "rank_bm25"
