"""The `full` plan end to end, and the helpers the filter steps' tests share (hand-built states on a tiny
index): the conformal step's tests are in test_full_plan_conformal.py, GMM's and RSE's in
test_full_plan_filters.py."""

from __future__ import annotations

import shutil

import pytest

from ragsieve.agent.calibration import Calibrator, save_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import END, Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.plan.plans import BUILTIN_PLANS, STEPS
from ragsieve.testing import FakeChat
from ragsieve.testing.full_plan import full_plan_reply
from ragsieve.tools.types import Hit
from tests.core.test_calibration import FACTS, TinyIndex, bow, scripted_llm  # noqa: F401  (FACTS, TinyIndex: shared)

QUESTION = "How do I rotate the API key of a Lumen workspace, and what happens to the old key?"


def hits_for(index, question, rows=None):
    q = bow(question)
    rows = range(index.store.count()) if rows is None else rows
    hits = [
        Hit(chunk=index.store.get(r), row=r, score=float(index.vectors[r] @ q), dense_score=float(index.vectors[r] @ q))
        for r in rows
    ]
    return sorted(hits, key=lambda h: -h.score)


def make(index, question, context_rows=None, **sections):
    config = Config()
    for name, updates in sections.items():
        setattr(config, name, getattr(config, name).model_copy(update=updates))
    pool = hits_for(index, question)
    state = RunState(question=question, plan="full")
    state.remember(pool)
    state.context = pool[:4] if context_rows is None else [h for h in pool if h.row in context_rows]
    deps = Deps(config=config, retriever=None, index=index, llm=None, prompts=PromptRenderer())
    return state, deps


def run_step(name, state, deps):
    result = STEPS[name]().run(state, deps)
    assert result.outcome == "next"
    return result.summary_dict()  # the trace's JSON form, whether the step's summary is a model or a dict


def calibrate(index, alpha=0.3):
    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=alpha, depth=6, seed=0).run(questions=6)
    save_calibration(cal, index.root)
    return cal


# -- the `full` plan end to end -------------------------------------------------------------
fake_model = full_plan_reply  # the scripted model the full-plan tests share (`ragsieve.testing.full_plan`)


@pytest.fixture
def calibrated_index(examples_index, tmp_path):
    from ragsieve.tools.index.local.index import HybridIndex

    folder = tmp_path / "index"
    shutil.copytree(examples_index, folder)
    with HybridIndex.open(folder) as index:
        cal = Calibrator(index, llm=LLM(FakeChat(default=fake_model)), prompts=PromptRenderer(), alpha=0.2, depth=10, seed=0).run(
            questions=12
        )
        save_calibration(cal, folder)
    return folder


def check_trace(answer, plan_name="full"):
    """The full plan's order: every answer written from filtered context, the last one validated."""
    steps = [e.step for e in answer.trace]
    plan = BUILTIN_PLANS[plan_name]
    assert steps[0] == plan.start and steps[-1] == "validate"
    for event, nxt in zip(answer.trace, steps[1:] + [END]):
        assert plan.transitions[event.step][event.outcome] == nxt
    assert steps[-5:] == ["conformal", "outliers", "segments", "answer", "validate"]
    last = answer.trace[-1]
    assert last.summary["validated"] == "answer" and answer.resolved == last.summary["resolved"]
    return {e.step: e.summary_dict() for e in answer.trace}  # each step's summary in its JSON form


def test_full_plan_with_fake_llm(calibrated_index):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    with Orchestrator.open(calibrated_index, config, chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    s = check_trace(answer)
    conf, out, seg = s["conformal"], s["outliers"], s["segments"]
    assert conf["status"] == "applied"
    assert set(conf["passing"]) <= set(conf["kept"]) | set(conf["over_budget"])
    assert set(out["kept"]) | set(out["removed"]) == set(conf["kept"])
    assert all(out["flag_counts"][i] >= config.outliers.min_outlier_freq for i in out["removed"])
    assert set(seg["kept"]) | set(seg["removed"]) == set(out["kept"])
    # the answer was written from exactly what the last filter produced (a segment, or its input unchanged)
    assert seg["status"] in ("applied", "no_segment")
    final = seg["context"] if seg["status"] == "applied" else seg["kept"]
    assert [h.chunk_id for h in answer.context] == final and final
    assert_conformal_set_kept(answer, seg)
    assert answer.answer.strip()


def assert_conformal_set_kept(answer, seg):
    """Every member of the conformal set reaches the answer's context (as itself or inside a segment), and the
    answer states its coverage as the calibration's 1 - alpha, read from the calibration file."""
    members = set(seg["kept"]) | set(seg.get("added", [])) | {c for d in seg.get("segments", []) for c in d["chunk_ids"]}
    assert set(answer.conformal.passing) <= members
    assert answer.coverage_guaranteed is True and not answer.conformal.reduced


def test_full_plan_runs_gmm_when_enabled_and_keeps_the_conformal_set(calibrated_index):
    """GMM enabled in `full` (one Gaussian, so it always flags its tail): it fits and flags, removes exactly
    the flagged context chunks no promise protects, and every conformal member still reaches the answer."""
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    config.outliers = config.outliers.model_copy(
        update={
            "enabled": True,
            "method": "weighted_sum",
            "n_components": [1],
            "pca_dims": [1],
            "min_outlier_freq": 1,
            "protect_top": 0,
        }
    )
    with Orchestrator.open(calibrated_index, config, chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    s = check_trace(answer)
    conf, out, seg = s["conformal"], s["outliers"], s["segments"]
    assert out["status"] == "applied" and out["runs_completed"] == 1
    flagged = {i for i, c in out["flag_counts"].items() if c >= 1}
    assert flagged  # the tail of one Gaussian is never empty
    protected = set(conf["passing"]) | set(out["kept_by_judge"])
    assert out["removed"] == [i for i in conf["kept"] if i in flagged and i not in protected]
    assert set(out["kept_by_conformal"]) == (flagged & set(conf["passing"])) - set(out["kept_by_judge"])
    assert set(out["kept"]) == set(conf["kept"]) - set(out["removed"])
    assert_conformal_set_kept(answer, seg)


def test_full_plan_with_filters_off(examples_index):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    for name in ("conformal", "outliers", "segments"):
        setattr(config, name, getattr(config, name).model_copy(update={"enabled": False}))
    with Orchestrator.open(examples_index, config, chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    s = check_trace(answer)
    converged = [e.summary for e in answer.trace if e.step == "expand"][-1]["context"]
    for name in ("conformal", "outliers", "segments"):
        assert s[name]["status"] == "disabled" and s[name]["kept"] == converged
    assert [h.chunk_id for h in answer.context] == converged


@pytest.mark.llm
def test_full_plan_with_local_llm(calibrated_index, local_llm):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()  # small candidate sets keep the prompts short on a CPU
    config.loop = config.loop.model_copy(update={"max_iterations": 1})
    config.retrieval = config.retrieval.model_copy(update={"top_k": 3, "pool": 4})
    with Orchestrator.open(calibrated_index, config, llm=local_llm) as orch:
        answer = orch.ask(QUESTION, plan="full")
    s = check_trace(answer)
    assert s["conformal"]["status"] == "applied"
    assert_conformal_set_kept(answer, s["segments"])
    assert answer.answer.strip() and answer.context
    assert all(c.chunk_id in {h.chunk_id for h in answer.context} for c in answer.citations)
