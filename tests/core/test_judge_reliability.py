"""`loop.combine = auto`: the judge's recall is measured, and the measurement decides between the
relevant set alone and relevant set + conformal set (+ the fast context when it is the stronger
statistic). Scripted judges for the logic; the real CLI over a real index for `calibrate --judge`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ragsieve.agent.calibration import load_calibration
from ragsieve.agent.core.state import JudgeRoundReport
from ragsieve.agent.judging.measure import JudgeReliability, measure_judge
from ragsieve.agent.judging.reliability import decide_rule
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.modes import ContextRule
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Hit
from tests.core.test_full_plan import FACTS, TinyIndex, calibrate, hits_for, make, run_step


def _reliability(recall, n=40, fast=0.8, pool=0.95):
    return JudgeReliability(
        model="m",
        n=n,
        questions=n,
        judge_recall=recall,
        false_positive_rate=0.1,
        pool=20,
        fast_recall=fast,
        pool_recall=pool,
        near_misses=19 * n,
        near_misses_relevant=0,
        answer_called=round(recall * n),
    )  # a precise judge: every pick bears the answer


def test_explicit_rules_are_applied_as_configured():
    for rule in ("relevant", "union", "anchored"):
        got, with_fast, why = decide_rule(rule, _reliability(0.1), None, top_k=5, pool=20, margin=0.02, min_n=20, coverage=0.5)
        assert got is ContextRule(rule) and not with_fast and rule in why


def test_auto_trusts_a_judge_whose_measured_recall_keeps_up_with_the_fast_context():
    args = dict(top_k=5, pool=20, margin=0.02, min_n=20, coverage=0.9)
    rule, with_fast, why = decide_rule("auto", _reliability(1.0), None, **args)
    assert rule is ContextRule.RELEVANT and not with_fast and "0.950 vs fast recall 0.800" in why
    rule, _, why = decide_rule("auto", _reliability(0.8), None, **args)  # 0.8 x 0.95 = 0.76 < 0.78
    assert rule is ContextRule.UNION and "0.760" in why
    rule, _, why = decide_rule("auto", _reliability(0.83), None, **{**args, "coverage": 0.75})  # 0.7885 >= 0.78
    assert rule is ContextRule.RELEVANT
    # ... but not where the relevant set alone would fall below the conformal coverage 1 - alpha
    rule, _, why = decide_rule("auto", _reliability(0.83), None, **args)  # 0.7885 < 0.9
    assert rule is ContextRule.UNION and "would not keep 1 - alpha" in why
    rule, _, why = decide_rule("auto", _reliability(1.0, n=5), None, **args)
    assert rule is ContextRule.UNION and "fewer than loop.trust_min_n" in why
    rule, _, why = decide_rule("auto", None, None, **args)
    assert rule is ContextRule.UNION and "calibrate --judge" in why


def test_auto_adds_the_fast_context_to_the_statistics_only_when_it_is_measured_stronger():
    args = dict(top_k=5, pool=20, margin=0.02, min_n=20)
    assert decide_rule("auto", _reliability(0.7, fast=0.97), None, coverage=0.9, **args)[1] is True
    assert decide_rule("auto", _reliability(0.7, fast=0.85), None, coverage=0.9, **args)[1] is False
    # unmeasured judge: the calibration's similarity ranks stand in for the fast recall
    ranks = np.array([1, 2, 3, 4, 1, 2, 30, np.inf, 1, 1], dtype=float)  # 8 of 10 within top 5
    rule, with_fast, _ = decide_rule("auto", None, ranks, coverage=0.7, **args)
    assert rule is ContextRule.UNION and with_fast
    assert decide_rule("auto", None, ranks, coverage=0.9, **args)[1] is False


def _hit(cid, row):
    from ragsieve.tools.types import Chunk

    doc, index = cid.split("#")
    return Hit(chunk=Chunk(doc_id=doc, chunk_index=int(index), text=cid, source=doc), row=row, score=1.0 / (row + 1))


def test_measure_judge_counts_recall_false_positives_and_the_retrievers_own_recalls():
    pools = {
        "q1": [_hit("a#0", 0), _hit("b#0", 1), _hit("c#0", 2)],  # answer at rank 1
        "q2": [_hit("d#0", 0), _hit("e#0", 1), _hit("f#0", 2)],  # answer at rank 3
        "q3": [_hit("g#0", 0), _hit("h#0", 1)],  # answer not in the pool
    }
    positives = {"q1": {"a#0"}, "q2": {"f#0"}, "q3": {"zz#0"}}
    verdicts = {
        "q1": {"a#0": True, "b#0": True, "c#0": False},
        "q2": {"d#0": False, "e#0": False, "f#0": False},
        "q3": {"g#0": False, "h#0": False},
    }
    items = [(q, positives[q], pools[q]) for q in pools]
    got = measure_judge(items, lambda q, hits: verdicts[q], model="m", pool=3, top_k=2)
    assert (got.n, got.questions, got.judge_recall) == (2, 3, 0.5)  # q1 found, q2 missed, q3 not in the pool
    assert got.false_positive_rate == round(1 / 6, 4)  # b#0, of the six other pool chunks judged
    assert (got.fast_recall, got.pool_recall) == (round(1 / 3, 4), round(2 / 3, 4))
    failed = measure_judge(items, lambda q, hits: {}, model="m", pool=3, top_k=2)
    assert failed.failed == 3 and failed.judge_recall is None


@pytest.mark.parametrize(
    "recall,alone_allowed,expected", [(1.0, True, "relevant"), (1.0, False, "relevant"), (0.5, True, "union")]
)
def test_conformal_step_applies_the_rule_the_measurement_chose(tmp_path, recall, alone_allowed, expected):
    index = TinyIndex(tmp_path, FACTS)
    cal = calibrate(index)
    saved = json.loads((tmp_path / "calibration.json").read_text())
    saved["qhat"]["raw"] = 2.0  # every pool chunk passes: union = the whole pool
    saved["judges"] = {"judge-x": _reliability(recall, fast=0.9, pool=1.0).model_copy(update={"model": "judge-x"}).model_dump()}
    (tmp_path / "calibration.json").write_text(json.dumps(saved))
    state, deps = make(index, "beta bridge toll", conformal={"score_kind": "raw"}, loop={"relevant_alone": alone_allowed})
    deps.llm = LLM(FakeChat(model_name="judge-x"))
    state.loop.rounds.append(JudgeRoundReport(round=1, judged=6, mode="judge", reason=""))
    state.loop.trusted.update({"gamma.md#1": True, "beta.md#1": False})
    summary = run_step("conformal", state, deps)
    assert state.loop.rule == expected and summary["rule"].startswith(f"auto: {expected}")
    # 40 of 40 calibration questions: the one-sided 95 % Clopper-Pearson bound is 0.05 ** (1 / 40) = 0.928
    bound_reaches = 0.05 ** (1 / 40) >= 1 - cal.alpha
    assert bound_reaches  # the fixture's alpha leaves room for the bound: the `alone` branch is exercised
    if expected == "relevant" and alone_allowed:  # the judge's bounded recall carries the coverage
        assert summary["combined_with"].startswith("relevant set alone") and summary["kept"] == ["gamma.md#1"]
        assert "relevant set alone: answer's chunk in the pool and judged relevant on 40 of 40" in summary["rule"]
        assert state.conformal.basis == "judge recall bound" and summary["coverage_guaranteed"] is True
    elif expected == "relevant":  # the relevant set first, and the conformal set kept (issue 46: its coverage holds)
        assert summary["passing"] and summary["combined_with"] == "relevant set + conformal set"
        assert summary["kept"] == ["gamma.md#1"] + [c for c in summary["passing"] if c != "gamma.md#1"]
        assert "loop.relevant_alone = false" in summary["rule"] and state.conformal.basis == "conformal set"
    else:
        assert set(summary["kept"]) == {h.chunk_id for h in hits_for(index, state.question)}


def test_recall_lower_bound_is_clopper_pearson():
    """Checked against the binomial tail it inverts (scipy's binom, not the beta quantile the code uses): at the
    bound, seeing k or more successes in n has probability 1 - confidence."""
    from scipy.stats import binom

    from ragsieve.agent.judging.bounds import recall_lower_bound, relevant_alone

    for k, n in ((59, 60), (53, 60), (40, 40), (1, 5)):
        p = recall_lower_bound(k, n, 0.95)
        assert 0 < p < k / n + 1e-12 and binom.sf(k - 1, n, p) == pytest.approx(0.05, abs=1e-9)
    assert recall_lower_bound(0, 10, 0.95) == 0.0 and recall_lower_bound(3, 0, 0.95) == 0.0
    assert recall_lower_bound(60, 60, 0.95) == pytest.approx(0.05 ** (1 / 60))
    oracle = JudgeReliability(
        model="m",
        n=59,
        questions=60,
        judge_recall=1.0,
        false_positive_rate=0.0,
        pool=20,
        near_misses=1121,
        near_misses_relevant=0,
        answer_called=59,
    )
    noisy = oracle.model_copy(update={"judge_recall": round(53 / 59, 4)})
    assert relevant_alone(oracle, 0.9, 0.95)[0] is True  # 59 of 60: bound 0.922 >= 0.9
    assert relevant_alone(noisy, 0.9, 0.95)[0] is False  # 53 of 60: bound 0.79
    assert relevant_alone(oracle, 0.95, 0.95)[0] is False and relevant_alone(None, 0.9, 0.95)[0] is False
    # issue 56: recall alone is not enough: without a measured precision, or with a low one, the set is not alone
    unmeasured = oracle.model_copy(update={"near_misses": 0, "answer_called": 0})
    assert relevant_alone(unmeasured, 0.9, 0.95) == (False, relevant_alone(unmeasured, 0.9, 0.95)[1])
    assert "precision not measured" in relevant_alone(unmeasured, 0.9, 0.95)[1]
    imprecise = oracle.model_copy(update={"near_misses_relevant": 7})  # 59 of 66 picks: bound 0.83
    alone, why = relevant_alone(imprecise, 0.9, 0.95)
    assert alone is False and "59 of its 66 calibration picks" in why
    assert float(why.split("precision lower bound ")[1].split(" ")[0]) == pytest.approx(
        recall_lower_bound(59, 66, 0.95), abs=5e-4
    )


def test_calibrate_judge_measures_the_configured_model_and_keeps_it(examples_index, tmp_path):
    """The real CLI, a real index, a scripted judge: `--judge N` stores the model's recall; a later
    calibration without --judge keeps it."""
    from ragsieve.agent.config import Config
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.cli.calibrate import measure_configured_judge
    from tests.core.test_full_plan import calibrated_index as _  # noqa: F401  (the fixture's fake model)
    from tests.core.test_full_plan import fake_model

    folder = tmp_path / "index"
    shutil.copytree(examples_index, folder)
    with Orchestrator.open(folder, Config(), chat=FakeChat(default=fake_model, model_name="judge-all")) as orch:
        from ragsieve.agent.calibration import Calibrator

        cal = Calibrator(orch.index, llm=orch.llm, prompts=orch.prompts, alpha=0.2, depth=10, seed=0).run(questions=8)
        got = measure_configured_judge(orch, cal, 6)
    assert got.model == "judge-all" and got.n >= 1 and got.judge_recall == 1.0  # it calls everything relevant
    assert got.false_positive_rate == 1.0 and got.pool_recall is not None
    # the loop's decoys were hidden in each pool (3 a question) and it called every one relevant
    assert got.decoys == 3 * got.questions and got.decoys_relevant == got.decoys
    from ragsieve.agent.calibration import save_calibration

    save_calibration(cal.model_copy(update={"judges": {got.model: got}}), folder)
    cli = [sys.executable, "-m", "ragsieve.cli.main", "calibrate", "--index", str(folder)]
    refused = subprocess.run(cli + ["--judge", "-1"], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "--judge takes a number of questions >= 0" in refused.stderr
    with Orchestrator.open(folder, Config()) as orch:  # a qrels calibration of two documents' first chunks
        chunks = [orch.index.store.get(r) for r in range(orch.index.store.count())]
    firsts = list({c.doc_id: c for c in reversed(chunks)}.values())[:3]
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{c.doc_id}\t1\n" for i, c in enumerate(firsts)), encoding="utf-8"
    )
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": c.text[:200]}) + "\n" for i, c in enumerate(firsts)), encoding="utf-8"
    )
    again = subprocess.run(
        cli + ["--qrels", str(tmp_path / "qrels.tsv"), "--queries", str(tmp_path / "queries.jsonl")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "judge judge-all: recall 1.000" in again.stdout  # kept from the previous calibration, and shown
    assert "decoys called relevant 18 of 18" in again.stdout
    assert "judge judge-all decides nothing under loop.combine = auto" in again.stdout
    loaded, _ = load_calibration(folder)  # noqa: F811
    assert loaded.origin == "qrels" and loaded.judges["judge-all"].judge_recall == 1.0
