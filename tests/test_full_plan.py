"""The filter steps (conformal, outliers, segments) on hand-built states, and the `full` plan end to end."""
from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest
from loop_fakes import fenced_text
from test_calibration import FACTS, TinyIndex, bow, scripted_llm

from ragsieve.agent.calibration import Calibrator, save_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.fake import FakeChat
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.plan.runner import END, Deps
from ragsieve.agent.plan.state import RunState
from ragsieve.agent.plans import BUILTIN_PLANS, STEPS
from ragsieve.tools.filters.conformal import ScoreKind, hybrid_signal, nonconformity
from ragsieve.tools.filters.gmm import GMMOutlierFilter
from ragsieve.tools.types import Hit

QUESTION = "How do I rotate the API key of a Lumen workspace, and what happens to the old key?"


def hits_for(index, question, rows=None):
    q = bow(question)
    rows = range(index.store.count()) if rows is None else rows
    hits = [Hit(chunk=index.store.get(r), row=r, score=float(index.vectors[r] @ q), dense_score=float(index.vectors[r] @ q))
            for r in rows]
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
    return result.summary


def calibrate(index, alpha=0.3):
    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=alpha, depth=6, seed=0).run(questions=6)
    save_calibration(cal, index.root)
    return cal


def test_every_filter_can_be_switched_off(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    state, deps = make(index, "beta bridge toll", conformal={"enabled": False}, outliers={"enabled": False},
                       segments={"enabled": False})
    before = [h.chunk_id for h in state.context]
    for name in ("conformal", "outliers", "segments"):
        summary = run_step(name, state, deps)
        assert summary["status"] == "disabled" and summary["kept"] == before and summary["removed"] == []
    assert [h.chunk_id for h in state.context] == before


def test_conformal_without_calibration_passes_through(tmp_path):
    state, deps = make(TinyIndex(tmp_path, FACTS), "beta bridge toll")
    before = [h.chunk_id for h in state.context]
    summary = run_step("conformal", state, deps)
    assert summary["status"] == "uncalibrated" and "ragsieve calibrate" in summary["note"]
    assert [h.chunk_id for h in state.context] == before and state.conformal is None


@pytest.mark.parametrize("kind", [k.value for k in ScoreKind])
def test_conformal_keeps_exactly_the_chunks_under_the_threshold(tmp_path, kind):
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    state, deps = make(index, "beta bridge toll coins", context_rows=range(6), conformal={"score_kind": kind})
    summary = run_step("conformal", state, deps)
    qhat = cal.threshold(ScoreKind(kind))
    signal = index.vectors.astype(float) @ bow(state.question)
    if ScoreKind(kind).hybrid:  # RRF of the dense and BM25 rankings over the whole index
        signal = hybrid_signal(signal, index.bm25.scores(state.question), cal.hybrid_k)
    order = list(np.argsort(-signal, kind="stable"))
    expected = [h.chunk_id for h in sorted(hits_for(index, state.question), key=lambda h: -signal[h.row])
                if nonconformity(ScoreKind(kind), signal[h.row], signal.max(), order.index(h.row) + 1) <= qhat]
    assert summary["status"] == "applied" and summary["kind"] == kind
    # CONFLARE: every pool chunk passing the cutoff, of whatever size, best signal first; nothing else
    assert summary["kept"] == expected == summary["passing"]
    assert set(summary["kept"]) | set(summary["removed"]) == {h.chunk_id for h in hits_for(index, state.question)}
    assert [h.chunk_id for h in state.context] == summary["kept"]
    assert state.evidence == ("strong" if expected else "none")
    assert state.conformal.coverage == pytest.approx(1 - cal.alpha)


def test_conformal_alpha_override_recomputes_the_threshold(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "rank", "alpha": 0.6})
    summary = run_step("conformal", state, deps)
    assert summary["alpha"] == 0.6 and state.conformal.coverage == pytest.approx(0.4)
    expected = cal.threshold(ScoreKind.RANK, 0.6)
    assert (summary["qhat"] is None and math.isinf(expected)) or summary["qhat"] == pytest.approx(expected)


def test_conformal_keeps_every_passing_pool_chunk_up_to_the_token_budget(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = 2.0  # every cosine >= -1 passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    state, deps = make(index, "beta bridge toll", context_rows=range(2), conformal={"score_kind": "raw"})
    summary = run_step("conformal", state, deps)
    everything = [h.chunk_id for h in hits_for(index, state.question)]
    assert summary["kept"] == everything and summary["over_budget"] == []  # not the 2-chunk context: the pool
    assert "budget_note" not in summary and not state.notes
    state, deps = make(index, "beta bridge toll", context_rows=range(2), conformal={"score_kind": "raw"},
                       loop={"context_tokens": 40})
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == everything[:len(summary["kept"])] and len(summary["kept"]) < len(everything)
    assert summary["over_budget"] == everything[len(summary["kept"]):]
    cut = len(everything) - len(summary["kept"])
    assert f"{cut} passing chunks were left out" in summary["budget_note"] and summary["budget_note"] in state.notes


def test_conformal_adds_the_trusted_relevant_set_under_union(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = -2.0  # nothing passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    from ragsieve.agent.plan.state import JudgeRoundReport

    for rule, expected in (("union", ["gamma.md#1"]), ("relevant", ["gamma.md#1"])):
        state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"}, loop={"combine": rule})
        state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
        state.loop.trusted.update({"gamma.md#1": True, "beta.md#1": False})
        summary = run_step("conformal", state, deps)
        assert summary["kept"] == expected and state.evidence == "judged"
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"})
    summary = run_step("conformal", state, deps)  # no judge, nothing passes: no evidence at all
    assert summary["kept"] == [] and state.evidence == "none"


@pytest.mark.parametrize("combine", ["union", "auto"])
def test_with_no_trusted_judge_the_conformal_set_joins_the_fast_context_never_replaces_it(tmp_path, combine):
    """Planted: the fast context holds a chunk the conformal cutoff rejects (the weakest pool chunk). With the
    judge distrusted the step keeps it beside the passing set: the stage never holds less than the one before."""
    from ragsieve.agent.plan.state import JudgeRoundReport

    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    question = "beta bridge toll coins"
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    passing = run_step("conformal", state, deps)["passing"]
    weakest = hits_for(index, question)[-1].chunk_id
    assert passing and weakest not in passing
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    state.first_stage = [weakest, passing[0]]
    state.context = [state.pool[c] for c in state.first_stage]
    state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
    state.loop.trusted.update({weakest: True})
    state.loop.distrusted = "round 1: called a decoy relevant"
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == [weakest] + passing and summary["removed"] == []
    assert summary["combined_with"] == "conformal set + fast context (no trusted judge)"
    assert state.evidence == "strong"
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["rank"] = -1.0  # nothing passes: the fast context stays, marked as such, and the model is asked
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    state, deps = make(index, question, conformal={"score_kind": "rank"}, loop={"combine": combine})
    state.first_stage = [weakest]
    state.context = [state.pool[weakest]]
    summary = run_step("conformal", state, deps)
    assert summary["kept"] == [weakest] and state.evidence == "fast"


def test_conformal_warns_when_corpus_changed(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    index.manifest["corpus_fingerprint"] = "fp-other"
    state, deps = make(index, "beta bridge toll")
    summary = run_step("conformal", state, deps)
    assert "corpus changed" in summary["warnings"][0]


def many_docs():
    topics = {"reactor": "reactor salt turbine heat norvik engineers",
              "bridge": "bridge toll coins carts walkers river",
              "garden": "garden tulips frost copper barrels rain"}
    docs = {}
    for t, words in topics.items():
        w = words.split()
        docs[f"{t}.md"] = [f"{t} " + " ".join(w[(i + j) % len(w)] for j in range(4)) + f" note {i}" for i in range(6)]
    return docs


def test_outliers_removes_the_flagged_context_chunks(tmp_path):
    index = TinyIndex(tmp_path, many_docs())
    state, deps = make(index, "bridge toll coins river", context_rows=range(18), outliers={"enabled": True, "min_outlier_freq": 1,
                                                                                                "protect_top": 0})
    before = [h.chunk_id for h in state.context]
    summary = run_step("outliers", state, deps)
    # reference: the same filter on the same fit set (context, best first) flags these
    ranked = hits_for(index, state.question)
    ref = GMMOutlierFilter(min_outlier_freq=1).run(index.vectors[[h.row for h in ranked]].astype(float),
                                                   bow(state.question))
    flagged = [h.chunk_id for h, out in zip(ranked, ref.outliers) if out]
    assert summary["fit_size"] == 18 and summary["runs_completed"] == 6
    assert set(summary["removed"]) == set(flagged) and summary["removed"]
    assert summary["kept"] == [i for i in before if i not in flagged] == [h.chunk_id for h in state.context]


def test_outliers_skip_notes_on_a_tiny_pool(tmp_path):
    state, deps = make(TinyIndex(tmp_path, FACTS), "beta bridge toll", outliers={"enabled": True})
    summary = run_step("outliers", state, deps)
    assert summary["runs_completed"] == 0 and summary["removed"] == []
    assert all(r["skipped"] and "needed" in r["note"] for r in summary["runs"])


def test_segments_bridge_a_sandwiched_chunk_and_rebuild_text(tmp_path):
    docs = {"guide.md": ["rotate the api key in settings", "unrelated weather words here",
                         "old api key stops working after rotate", "cooking pasta recipe"],
            "other.md": ["nothing about keys at all"]}
    index = TinyIndex(tmp_path, docs)
    state, deps = make(index, "rotate api key old", context_rows=[0, 2],
                       segments={"relevance": "cosine", "cosine_low": 0.0, "cosine_high": 0.5})
    summary = run_step("segments", state, deps)
    assert summary["status"] == "applied" and summary["relevance"] == "cosine"
    seg = summary["segments"][0]
    assert seg["chunk_ids"] == ["guide.md#0", "guide.md#1", "guide.md#2"]  # the middle chunk is sandwiched
    assert summary["added"] == ["guide.md#1"] and summary["removed"] == []
    assert len(state.context) == 1
    merged = state.context[0]
    assert merged.chunk.text == "\n".join(docs["guide.md"][:3]) and merged.chunk.chunk_id == "guide.md#0"


def test_segments_without_a_worthy_segment_leave_the_context(tmp_path):
    index = TinyIndex(tmp_path, FACTS)
    state, deps = make(index, "beta bridge toll", segments={"relevance": "cosine", "minimum_value": 5.0})
    before = [h.chunk_id for h in state.context]
    summary = run_step("segments", state, deps)
    assert summary["status"] == "no_segment" and [h.chunk_id for h in state.context] == before


# -- the `full` plan end to end -------------------------------------------------------------
def fake_model(messages):
    """Reads the prompt: judge (all relevant), validate (resolved), calibration prompts, else an answer."""
    prompt = messages[0]["content"]
    if "mapping an index to the chunk's text" in prompt:
        body = prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0]
        return json.dumps({k: True for k in json.loads(body)})
    if "Draft answer:" in prompt:
        return json.dumps({"resolved": True, "reason": "scripted"})
    if "write ONE question" in prompt:
        words = re.findall(r"[A-Za-z]{3,}", fenced_text(prompt))
        return json.dumps({"question": " ".join(words[:10]), "answer": " ".join(words[:3])})
    if "Expected answer:" in prompt:
        answer = re.search(r"Expected answer: (.*)", prompt).group(1)
        return json.dumps({"contains": answer.lower() in fenced_text(prompt).lower()})
    return "Rotate the key in the workspace settings [1]."


@pytest.fixture
def calibrated_index(examples_index, tmp_path):
    from ragsieve.tools.index.local.index import HybridIndex

    folder = tmp_path / "index"
    shutil.copytree(examples_index, folder)
    with HybridIndex.open(folder) as index:
        cal = Calibrator(index, llm=LLM(FakeChat(default=fake_model)), prompts=PromptRenderer(), alpha=0.2,
                         depth=10, seed=0).run(questions=12)
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
    return {e.step: e.summary for e in answer.trace}


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
    assert answer.coverage == pytest.approx(0.8)
    assert answer.answer.strip()


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
    assert s["conformal"]["status"] == "applied" and answer.coverage == pytest.approx(0.8)
    assert answer.answer.strip() and answer.context
    assert all(c.chunk_id in {h.chunk_id for h in answer.context} for c in answer.citations)


def test_outliers_never_remove_the_protected_best_chunks(tmp_path):
    index = TinyIndex(tmp_path, many_docs())
    state, deps = make(index, "bridge toll coins river", context_rows=range(18),
                       outliers={"enabled": True, "min_outlier_freq": 1, "protect_top": 4})
    best_four = [h.chunk_id for h in hits_for(index, state.question)][:4]
    summary = run_step("outliers", state, deps)
    assert summary["runs_completed"] == 6
    assert not set(summary["removed"]) & set(best_four)
    assert set(best_four) <= {h.chunk_id for h in state.context}


def test_conformal_corpus_candidates_admit_passing_chunks_beyond_the_pool(tmp_path):
    """`candidates = "corpus"` is CONFLARE's threshold retrieval: a chunk that passes the cutoff is kept even
    when the first stage did not put it in the pool; `pool` keeps only pool chunks."""
    index = TinyIndex(tmp_path, FACTS)
    calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = 2.0  # every chunk passes
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    everything = [h.chunk_id for h in hits_for(index, "beta bridge toll")]
    for mode, expected in (("pool", set(everything[:2])), ("corpus", set(everything))):
        state, deps = make(index, "beta bridge toll", context_rows=[], conformal={"score_kind": "raw", "candidates": mode},
                           loop={"combine": "relevant"})
        for cid in everything[2:]:  # the first stage found only the best two
            del state.pool[cid]
        summary = run_step("conformal", state, deps)
        assert set(summary["kept"]) == expected
        assert set(state.pool) >= expected  # corpus chunks join the pool the later stages work from


def test_conformal_refuses_a_hybrid_kind_on_a_calibration_without_hybrid_scores(tmp_path):
    from ragsieve.agent.errors import UsageError

    index = TinyIndex(tmp_path, FACTS, bm25=False)
    calibrate(index)  # a calibration as older versions wrote it: dense kinds only
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "hybrid-ratio"})
    with pytest.raises(UsageError, match="calibrate again"):
        STEPS["conformal"]().run(state, deps)
