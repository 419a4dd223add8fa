"""A judge measured to accept decoys decides nothing under `loop.combine = auto` (issue 46, the abstention gap).

Calibration hides the loop's decoys among each question's pool and counts the ones the judge calls relevant
(`judging.measure.measure_judge`); `judge_barred` bars a judge whose rate, bounded below (Clopper-Pearson),
exceeds `loop.trust_decoy_rate`. Logic on scripted judges; the plan on a real index of examples/ with the
offline MiniLM embeddings and the scripted fake model, whose calls are recorded: a barred judge is never asked.
"""

from __future__ import annotations

import shutil

import pytest
from scipy.stats import binom

import ragsieve.agent.steps.conformal  # noqa: F401  (registers the full plan's steps)
import ragsieve.agent.steps.fallback  # noqa: F401
import ragsieve.agent.steps.outliers  # noqa: F401
import ragsieve.agent.steps.segments  # noqa: F401
from ragsieve.agent.calibration import load_calibration, save_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.judging.bounds import judge_barred
from ragsieve.agent.judging.measure import JudgeReliability, measure_judge
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit
from tests.core.test_full_plan import QUESTION, calibrated_index  # noqa: F401  (a fixture)
from tests.support.loop_fakes import Script

ANSWER = "Rotate the key in the workspace settings [1]."


def _measured(called: int, shown: int = 180, model: str = "fake") -> JudgeReliability:
    return JudgeReliability(
        model=model,
        n=60,
        questions=60,
        judge_recall=1.0,
        false_positive_rate=0.0,
        pool=20,
        fast_recall=0.9,
        pool_recall=0.98,
        decoys=shown,
        decoys_relevant=called,
    )


def test_a_judge_is_barred_when_its_decoy_rate_bounded_below_exceeds_the_setting():
    # 60 calibration questions x 3 decoys: a judge flipping a quarter of its verdicts calls ~45 relevant
    barred, why = judge_barred(_measured(45), 0.1, 0.95)
    assert barred and "45 of 180" in why and "> loop.trust_decoy_rate 0.1" in why
    bound = float(why.split("lower bound ")[1].split(" ")[0])
    assert binom.sf(44, 180, bound) == pytest.approx(0.05, abs=2e-3)  # the bound the reason states is the CP bound
    # a tenth (18 of 180: bound ~0.065) and a capable judge (0) decide; so does one measured without decoys
    assert judge_barred(_measured(18), 0.1, 0.95)[0] is False
    assert judge_barred(_measured(0), 0.1, 0.95) == (False, judge_barred(_measured(0), 0.1, 0.95)[1])
    assert judge_barred(_measured(0, shown=0), 0.1, 0.95) == (False, "")
    assert judge_barred(None, 0.1, 0.95) == (False, "")
    # the setting moves the line: 1.0 never bars, 0.0 bars any judge seen to accept a decoy at all
    assert judge_barred(_measured(180), 1.0, 0.95)[0] is False
    assert judge_barred(_measured(1), 0.0, 0.95)[0] is True and judge_barred(_measured(0), 0.0, 0.95)[0] is False


def _hit(cid: str, row: int) -> Hit:
    doc, index = cid.split("#")
    return Hit(chunk=Chunk(doc_id=doc, chunk_index=int(index), text=cid, source=doc), row=row, score=1.0 / (row + 1))


def test_measure_judge_hides_decoys_in_the_pool_and_counts_them_apart():
    pool = [_hit(f"d{i}#0", i) for i in range(6)]
    controls = {"q1": [_hit("x1#0", 90), _hit("x2#0", 91)], "q2": [_hit("x3#0", 92), _hit("d0#0", 0)]}
    shown: dict[str, list[str]] = {}

    def decoys(question, exclude):
        return [h for h in controls[question] if h.chunk_id not in exclude]  # as pick_decoys leaves out the pool

    def judge(question, hits):
        shown[question] = [h.chunk_id for h in hits]
        return {h.chunk_id: h.chunk_id in ("d1#0", "x1#0") for h in hits}  # gold, and one decoy on q1

    got = measure_judge([("q1", {"d1#0"}, pool), ("q2", {"d1#0"}, pool)], judge, model="m", pool=6, top_k=2, decoys=decoys)
    assert sorted(shown["q1"]) == sorted([h.chunk_id for h in pool] + ["x1#0", "x2#0"])
    from ragsieve.agent.judging.checks import interleave  # the loop's own placement, seeded by the question

    assert shown["q1"] == [h.chunk_id for h in interleave(pool, controls["q1"], "q1")]
    assert got.decoys == 3 and got.decoys_relevant == 1  # d0#0 was in the pool: not a decoy on q2
    # decoys are neither positives nor negatives: the pool's 5 other chunks twice, none called relevant
    assert got.judge_recall == 1.0 and got.false_positive_rate == 0.0 and got.n == 2
    without = measure_judge([("q1", {"d1#0"}, pool)], judge, model="m", pool=6, top_k=2)
    assert without.decoys == 0 and without.decoys_relevant == 0 and shown["q1"] == [h.chunk_id for h in pool]


def _barred_index(index, tmp_path, reliability: JudgeReliability):
    folder = tmp_path / "barred"
    shutil.copytree(index, folder)
    cal, _ = load_calibration(folder)
    save_calibration(cal.model_copy(update={"judges": {reliability.model: reliability}}), folder)
    return folder


def _ask(index, script: Script, **loop):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    config.loop = config.loop.model_copy(update=loop)
    with Orchestrator.open(index, config, chat=FakeChat(default=script)) as orch:
        return orch.ask(QUESTION, plan="full")


def test_a_barred_judge_is_never_asked_and_the_context_is_the_statistical_evidence(calibrated_index, tmp_path):  # noqa: F811
    folder = _barred_index(calibrated_index, tmp_path, _measured(45))
    script = Script(judge=lambda q, t: True, answer=ANSWER, validate=[False, False])
    answer = _ask(folder, script)
    assert "judge" not in script.kinds  # no judge call, in the loop or in the fallback
    first = answer.loop.rounds[0]
    assert first.mode == "skipped" and "decides nothing" in first.reason and "45 of 180" in first.reason
    assert answer.loop.distrusted.startswith("calibration: ") and not answer.loop.judge_trusted
    assert answer.loop.rule_reason.startswith("auto: judge barred (it decides nothing: judge called 45 of 180")
    fb = answer.fallback
    assert fb is not None and fb.judge_mode == "skipped" and fb.added == [] and not fb.score_based
    # the context the filters start from: the fast context and the conformal set, exactly
    from ragsieve.agent.orchestrator import Orchestrator

    with Orchestrator.open(folder, Config(), chat=FakeChat(default=script)) as orch:
        fast = {h.chunk_id for h in orch.ask(QUESTION, plan="fast").context}
    conformal = [e.summary_dict() for e in answer.trace if e.step == "conformal"][-1]
    assert fast and set(conformal["kept"]) == fast | set(conformal["passing"])
    assert "no trusted judge" in conformal["combined_with"]


def test_a_judge_under_the_line_and_explicit_rules_are_asked(calibrated_index, tmp_path):  # noqa: F811
    folder = _barred_index(calibrated_index, tmp_path, _measured(0))
    script = Script(judge=lambda q, t: "key" in t.lower(), answer=ANSWER, validate=True)
    answer = _ask(folder, script)
    assert "judge" in script.kinds and answer.loop.barred is None and answer.loop.rounds[0].mode != "skipped"
    barred = _barred_index(calibrated_index, tmp_path / "b", _measured(45))
    for settings in ({"combine": "union"}, {"trust_decoy_rate": 1.0}):  # auto only; the setting is applied
        script = Script(judge=lambda q, t: "key" in t.lower(), answer=ANSWER, validate=True)
        answer = _ask(barred, script, **settings)
        assert "judge" in script.kinds and answer.loop.barred is None, settings


def test_a_judge_measured_to_judge_by_position_is_barred_unless_the_order_check_is_off(calibrated_index, tmp_path):  # noqa: F811
    positional = _measured(0).model_copy(update={"order_compared": 480, "order_flipped": 240})
    folder = _barred_index(calibrated_index, tmp_path, positional)
    script = Script(judge=lambda q, t: True, answer=ANSWER, validate=True)
    answer = _ask(folder, script)
    assert "judge" not in script.kinds and answer.loop.rounds[0].mode == "skipped"
    assert "changed 240 of 480 verdicts when the same chunks came in reversed order" in answer.loop.barred
    script = Script(judge=lambda q, t: "key" in t.lower(), answer=ANSWER, validate=True)
    answer = _ask(folder, script, judge_order_check=False)  # no order checks anywhere: nothing to bar it on
    assert "judge" in script.kinds and answer.loop.barred is None
