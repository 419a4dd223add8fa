"""Judges that fail the way weak models do (issue 56): an over-eager judge's picks never stand alone, and an
over-strict judge's "nothing relevant" does not abstain when its calibrated recall is low.

The measurement is planted in a real calibrated index of examples/ (offline MiniLM embeddings) as `ragsieve calibrate
--judge N` stores it, with the counts such judges give at calibration (issue 56: the eager one accepted about 78 % of
the pool's non-answer chunks with recall 1.0; the strict one had recall 0.73); the scripted fake model is judge,
reader and validator, and its calls are recorded. Both fail on the code before issue 56: there the eager judge's
relevant set stood alone on its recall bound, and the strict judge's trusted empty verdict abstained.
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
from ragsieve.agent.judging.bounds import judge_barred, relevant_alone
from ragsieve.agent.judging.measure import JudgeReliability, measure_judge
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit
from tests.core.test_full_plan import QUESTION, calibrated_index  # noqa: F401  (a fixture)
from tests.support.loop_fakes import Script

ANSWER = "Rotate the key in the workspace settings [1]."
STOP = {"what", "does", "with", "that", "this", "from", "have", "and", "the", "how"}


def _words(text: str) -> set[str]:
    return {w.strip(".,?!:;()").lower() for w in text.split()} - STOP - {""}


def eager(question: str, text: str) -> bool:
    """Relevant when the chunk shares any content word (4+ letters) with the question."""
    return any(len(w) >= 4 for w in _words(question) & _words(text))


def _record(model: str, *, k: int, near: int, near_called: int, answer_called: int, n: int = 60) -> JudgeReliability:
    return JudgeReliability(
        model=model,
        n=n,
        questions=n,
        judge_recall=round(k / n, 4),
        false_positive_rate=round(near_called / near, 4),
        pool=20,
        fast_recall=0.9,
        pool_recall=1.0,
        decoys=3 * n,
        decoys_relevant=0,
        near_misses=near,
        near_misses_relevant=near_called,
        answer_called=answer_called,
    )


EAGER = _record("eager", k=60, near=1140, near_called=889, answer_called=60)  # recall 1.0, 78 % of near misses
STRICT = _record("strict", k=44, near=1140, near_called=0, answer_called=44)  # recall 0.73, precise


def _planted(index, tmp_path, reliability: JudgeReliability):
    folder = tmp_path / reliability.model
    shutil.copytree(index, folder)
    cal, _ = load_calibration(folder)
    save_calibration(cal.model_copy(update={"judges": {reliability.model: reliability}}), folder)
    return folder


def _ask(index, script: Script, model: str, plan: str = "full", **loop):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    config.loop = config.loop.model_copy(update=loop)
    with Orchestrator.open(index, config, chat=FakeChat(default=script, model_name=model)) as orch:
        return orch.ask(QUESTION, plan=plan)


def _fast(index, script: Script) -> set[str]:
    return {h.chunk_id for h in _ask(index, script, "x", plan="fast").context}


def test_near_misses_and_precision_are_measured_and_bounded():
    from ragsieve.agent.judging.bounds import abstention_supported

    pool = [Hit(chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=f"d{i}", source="s"), row=i, score=1.0) for i in range(5)]
    verdicts = {"d0#0": True, "d1#0": True, "d2#0": True, "d3#0": False, "d4#0": True}
    got = measure_judge([("q", {"d0#0"}, pool, {"d1#0"})], lambda q, hits: verdicts, model="m", pool=5, top_k=2)
    # d1 bears the answer too (a second hop): neither a near miss nor a miss; d2, d3, d4 are near misses
    assert (got.near_misses, got.near_misses_relevant, got.answer_called) == (3, 2, 2)
    assert got.judge_recall == 1.0 and got.false_positive_rate == round(2 / 3, 4)
    # the eager judge is barred on its near misses although it passes every decoy
    barred, why = judge_barred(EAGER, 0.1, 0.95, 0.1)
    assert barred and "889 of 1140 near misses" in why and "decoys" not in why
    bound = float(why.split("lower bound ")[1].split(" ")[0])
    exact = binom.sf(888, 1140, bound)  # the Clopper-Pearson bound: the tail it inverts is 5 % there (3 decimals shown)
    assert binom.sf(888, 1140, bound - 5e-4) < 0.05 * 1.6 and exact == pytest.approx(0.05, rel=0.25)
    assert judge_barred(EAGER, 0.1, 0.95, 1.0)[0] is False  # 1.0 turns the near-miss bar off
    assert judge_barred(STRICT, 0.1, 0.95, 0.1)[0] is False
    # recall 1.0 is not enough to stand alone: 60 of 949 picks bear the answer
    alone, why = relevant_alone(EAGER, 0.8, 0.95)
    assert alone is False and "60 of its 949 calibration picks" in why
    assert relevant_alone(_record("o", k=60, near=1140, near_called=0, answer_called=60), 0.8, 0.95)[0] is True
    # the strict judge's recall, bounded below, is under 1 - alpha: its "nothing relevant" cannot abstain
    supported, why = abstention_supported(STRICT, 0.8, 0.95)
    assert supported is False and "44 of 60" in why
    assert abstention_supported(EAGER, 0.8, 0.95)[0] is True and abstention_supported(None, 0.8, 0.95) == (True, "")


def test_an_eager_judges_wrong_picks_do_not_stand_alone(calibrated_index, tmp_path):  # noqa: F811
    folder = _planted(calibrated_index, tmp_path, EAGER)
    script = Script(judge=eager, answer=ANSWER, validate=True)
    answer = _ask(folder, script, "eager")
    assert not answer.loop.rule_alone  # before issue 56: its relevant set stood alone on recall 1.0
    assert "near misses" in (answer.loop.barred or "") and "judge" not in script.kinds  # barred: never asked
    conformal = [e.summary_dict() for e in answer.trace if e.step == "conformal"][-1]
    assert not conformal["combined_with"].startswith("relevant set alone")
    assert set(conformal["kept"]) == _fast(folder, script) | set(conformal["passing"])  # fast context + conformal set
    # with the near-miss bar off, the measured precision alone keeps the conformal set beside its picks
    script = Script(judge=eager, answer=ANSWER, validate=True)
    answer = _ask(folder, script, "eager", trust_near_miss_rate=1.0)
    assert "judge" in script.kinds and answer.loop.barred is None and not answer.loop.rule_alone
    conformal = [e.summary_dict() for e in answer.trace if e.step == "conformal"][-1]
    assert set(conformal["passing"]) <= set(conformal["kept"])
    assert "precision lower bound" in (answer.loop.rule_reason or "")


def test_a_strict_judges_empty_verdict_does_not_abstain_when_its_recall_is_low(calibrated_index, tmp_path):  # noqa: F811
    folder = _planted(calibrated_index, tmp_path, STRICT)
    script = Script(judge=lambda q, t: False, answer=ANSWER, validate=True)
    answer = _ask(folder, script, "strict")
    first = answer.loop.rounds[0]
    assert first.mode == "judge" and first.decoys >= 1 and answer.loop.distrusted is None  # trusted, found nothing
    assert "does not abstain by itself" in answer.loop.rule_reason and "44 of 60" in answer.loop.rule_reason
    assert answer.abstention is None and answer.answer.startswith("Rotate the key")  # the model read the context
    assert "answer" in script.kinds
    conformal = [e.summary_dict() for e in answer.trace if e.step == "conformal"][-1]
    assert conformal["passing"] and set(conformal["passing"]) <= {h.chunk_id for h in answer.context} | set(
        c for s in answer.segments for c in s.chunk_ids
    )
    # the same verdict from a judge whose recall bound reaches 1 - alpha still abstains (the promise of issue 46)
    good = _planted(calibrated_index, tmp_path / "good", _record("strict", k=60, near=1140, near_called=0, answer_called=60))
    script = Script(judge=lambda q, t: False, answer=ANSWER, validate=True)
    answer = _ask(good, script, "strict")
    assert answer.abstention == "no_evidence" and "answer" not in script.kinds


def _primacy(question: str, hits: list) -> dict[str, bool]:
    """Issue 56's position-biased judge: the first two chunks shown are relevant, whatever they say."""
    return {h.chunk_id: i < 2 for i, h in enumerate(hits)}


def test_the_order_check_is_measured_at_calibration_and_bars_a_positional_judge():
    pool = [Hit(chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=f"d{i}", source="s"), row=i, score=1.0) for i in range(8)]
    items = [(f"q{i}", {"d0#0"}, pool) for i in range(30)]
    by_text = lambda q, hits: {h.chunk_id: h.chunk_id == "d0#0" for h in hits}  # noqa: E731
    steady = measure_judge(items, by_text, model="m", pool=8, top_k=2, order_k=3)
    # re-judged: the pick and the rejected ones of retrieval's top 3, reversed; a judge reading the text keeps them all
    assert (steady.order_compared, steady.order_flipped) == (90, 0)
    assert judge_barred(steady, 0.1, 0.95, 0.1, 0.2)[0] is False
    biased = measure_judge(items, _primacy, model="p", pool=8, top_k=2, order_k=3)
    # forward it picks d0, d1; reversed (d2, d1, d0) it picks d2, d1: d0 and d2 change, d1 stays
    assert (biased.order_compared, biased.order_flipped) == (90, 60)
    barred, why = judge_barred(biased, 0.1, 0.95, 1.0, 0.2)  # near-miss bar off: the order bar alone
    assert barred and "changed 60 of 90 verdicts" in why and "loop.order_max_flips 0.2" in why
    assert judge_barred(biased, 0.1, 0.95, 1.0, 1.0)[0] is False  # the order check off: nothing to bar on
    # without order_k nothing is re-judged (a record written before the measurement: never barred on it)
    unmeasured = measure_judge(items, _primacy, model="p", pool=8, top_k=2)
    assert unmeasured.order_compared == 0 and judge_barred(unmeasured, 0.1, 0.95, 1.0, 0.2)[0] is False
