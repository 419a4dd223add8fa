"""Calibrated abstention: the answerability cutoff as split conformal on unanswerable scores, its
calibration (held-out-document proxy and labelled unanswerable questions), and the answer step
honouring the model's abstention unless the calibrated evidence says answerable."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ragsieve.agent.steps.answer  # noqa: F401  (registers the step)
from ragsieve.agent.answer.answering import ABSTAIN, CLOSEST_INTRO, PASSAGES_INTRO, abstention_answer
from ragsieve.agent.calibration import Calibrator, load_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.testing import FakeChat
from ragsieve.tools.filters.abstention import abstention_rates, answerable_threshold, says_answerable, top1_excluding
from ragsieve.tools.metrics import is_abstention as counted_as_abstention
from tests.core.test_full_plan import QUESTION, calibrated_index, fake_model  # noqa: F401  (a fixture)


def test_cutoff_is_the_conformal_quantile_of_unanswerable_scores():
    scores = [0.1 * i for i in range(1, 10)]  # n = 9
    # eps 0.2: rank ceil(10 * 0.8) = 8 -> the 8th smallest
    assert answerable_threshold(scores, 0.2) == pytest.approx(0.8)
    # eps 0.05: rank ceil(10 * 0.95) = 10 > 9 -> too few scores: never overrule
    assert math.isinf(answerable_threshold(scores, 0.05))
    assert math.isinf(answerable_threshold([], 0.2))
    assert says_answerable(0.81, 0.8) and not says_answerable(0.8, 0.8) and not says_answerable(0.99, math.inf)
    rates = abstention_rates([0.9, 0.7, 0.85, 0.5], [0.3, 0.82, 0.1], 0.8)
    assert rates["answerable_detected"] == pytest.approx(0.5) and rates["false_answerable"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        answerable_threshold(scores, 0.0)


def test_the_false_answer_rate_holds_on_new_unanswerable_scores():
    """Exchangeable draws: the share of new unanswerable scores above the cutoff stays <= eps."""
    rng = np.random.default_rng(0)
    exceed = []
    for _ in range(200):
        cal, new = rng.normal(size=99), rng.normal(size=200)
        exceed.append(float(np.mean(new > answerable_threshold(cal, 0.1))))
    assert np.mean(exceed) <= 0.1 + 0.01


def test_held_out_document_proxy_is_the_best_other_row():
    sims = np.array([0.9, 0.8, 0.3, 0.5])
    assert top1_excluding(sims, [0, 1]) == pytest.approx(0.5)
    assert top1_excluding(sims, []) == pytest.approx(0.9)
    assert top1_excluding(sims, [0, 1, 2, 3]) is None


def test_calibrate_stores_the_held_out_document_proxy(calibrated_index):  # noqa: F811
    cal, _ = load_calibration(calibrated_index)
    ab = cal.abstention
    assert ab is not None and ab.origin == "heldout-document"
    records = [r for r in cal.records if r.heldout_top1 is not None]
    assert len(ab.unanswerable) + len(ab.heldout_unanswerable) == len(records) > 0
    # the proxy asks each question with its own document held out: never above the question's top-1
    assert all(r.heldout_top1 <= r.top1 + 1e-9 for r in records)
    assert len(ab.answerable) == cal.n_calibration and len(ab.heldout_answerable) == cal.n_heldout


def test_calibrate_with_labelled_unanswerable_questions(examples_index):
    from ragsieve.tools.index.local.index import HybridIndex

    unanswerable = [f"What is the boiling point of element number {i} on Mars?" for i in range(10)]
    with HybridIndex.open(examples_index) as index:
        cal = Calibrator(index, llm=LLM(FakeChat(default=fake_model)), prompts=PromptRenderer(), alpha=0.2, depth=10, seed=0).run(
            questions=6, unanswerable=unanswerable
        )
        vecs = index.embed(unanswerable)
        expected = sorted(round(float(np.max(index.vectors @ v)), 6) for v in vecs)
    ab = cal.abstention
    assert ab.origin == "labelled" and len(ab.unanswerable) == 5 and len(ab.heldout_unanswerable) == 5
    assert sorted(ab.unanswerable + ab.heldout_unanswerable) == pytest.approx(expected, abs=1e-5)


def _ask(folder, question, eps, chat):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    config.abstention = config.abstention.model_copy(update={"max_false_answer": eps})
    with Orchestrator.open(folder, config, chat=chat) as orch:
        return orch.ask(question, plan="fast")


def abstaining_model(messages):
    prompt = messages[0]["content"]
    return fake_model(messages) if "Question:" not in prompt or "Passages" not in prompt else ABSTAIN


def test_a_model_abstention_stands_when_the_evidence_does_not_say_answerable(calibrated_index):  # noqa: F811
    # eps 0.02 needs 49 unanswerable calibration scores: with 6 the cutoff is +inf, nothing is overruled
    answer = _ask(calibrated_index, QUESTION, 0.02, FakeChat(default=lambda m: ABSTAIN))
    assert answer.abstention == "model" and answer.answer.startswith(ABSTAIN)
    assert CLOSEST_INTRO in answer.answer and counted_as_abstention(answer.answer)
    listed = [c.chunk_id for c in answer.citations]  # the 3 closest quoted, then the rest of the top 5 named
    assert listed[:3] == [h.chunk_id for h in answer.context][:3] and set(listed) <= {h.chunk_id for h in answer.context}
    decision = [e.summary for e in answer.trace if e.step == "answer"][-1]["answerability"]
    assert decision["answerable"] is False and decision["threshold"] is None


def test_a_model_abstention_is_overruled_when_the_calibrated_score_says_answerable(calibrated_index):  # noqa: F811
    cal, _ = load_calibration(calibrated_index)
    cutoff = cal.abstention.threshold(0.2)
    assert not math.isinf(cutoff)
    from ragsieve.tools.index.local.index import HybridIndex

    with HybridIndex.open(calibrated_index) as index:  # a question that is a chunk's own text scores ~1.0
        text = index.store.get(0).text
        score = float(np.max(index.vectors @ index.embed([text])[0]))
    assert score > cutoff
    answer = _ask(calibrated_index, text, 0.2, FakeChat(default=lambda m: ABSTAIN))
    assert answer.abstention == "passages" and answer.answer.startswith(PASSAGES_INTRO)
    assert not counted_as_abstention(answer.answer) and answer.citations
    # a question far from every chunk keeps its abstention at the same rate
    far = _ask(calibrated_index, "zzqx vvbn plorf grastle", 0.2, FakeChat(default=lambda m: ABSTAIN))
    far_score = [e.summary for e in far.trace if e.step == "answer"][-1]["answerability"]["score"]
    assert far_score <= cutoff and far.abstention == "model" and counted_as_abstention(far.answer)


def test_answerability_is_scored_over_the_rows_the_metadata_filter_admits(calibrated_index):  # noqa: F811
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.search.where import Where

    cal, _ = load_calibration(calibrated_index)
    cutoff = cal.abstention.threshold(0.2)
    with HybridIndex.open(calibrated_index) as index:  # a chunk's own text, asked where its source is excluded
        chunk = index.store.get(0)
        others = sorted({index.store.get(r).source for r in range(len(index))} - {chunk.source})
        admitted = index.filter_rows(Where(source=others[0]))
        best_admitted = float(np.max(index.vectors[admitted] @ index.embed([chunk.text])[0]))
    config = Config()
    config.abstention = config.abstention.model_copy(update={"max_false_answer": 0.2})
    chat = FakeChat(default=lambda m: ABSTAIN)
    with Orchestrator.open(calibrated_index, config, chat=chat) as orch:
        everywhere = orch.ask(chunk.text, plan="fast")
        filtered = orch.ask(chunk.text, plan="fast", where=Where(source=others[0]))
        nothing = orch.ask(chunk.text, plan="fast", where=Where(path_prefix="/no/such/folder"))
    decision = [e.summary for e in filtered.trace if e.step == "answer"][-1]["answerability"]
    assert everywhere.abstention == "passages"  # the whole index holds the text itself
    assert decision["score"] == pytest.approx(best_admitted, abs=1e-5) and best_admitted < 0.999
    assert filtered.abstention == ("passages" if best_admitted > cutoff else "model")
    assert nothing.abstention in ("no_evidence", "model") and counted_as_abstention(nothing.answer)


def test_an_abstention_lists_no_passages_when_asked_not_to():
    assert abstention_answer([], 3) == (ABSTAIN, [])
