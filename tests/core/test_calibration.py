"""The calibrate workflow (agent.calibration) with FakeChat on a tiny in-memory index."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragsieve.agent.calibration import (
    Calibrator,
    ContainsVerdict,
    GeneratedQA,
    format_report,
    read_qrels,
)
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.tools.filters.conformal import ScoreKind, conformal_quantile, positive_scores
from tests.support.calibration_fakes import FACTS, TinyIndex, bow, scripted_llm  # test_full_plan imports them from here


@pytest.fixture
def index(tmp_path):
    return TinyIndex(tmp_path, FACTS)


def test_prompts_render_and_schemas():
    r = PromptRenderer()
    assert r.variables("calibrate_question") == {"passage", "source"}
    assert r.variables("calibrate_contains") == {"question", "answer", "passage"}
    assert GeneratedQA.model_validate({"question": "What?", "answer": "x"}).answer == "x"
    assert ContainsVerdict.model_validate({"contains": False}).contains is False


def test_generated_calibration_records_and_report(index):
    llm, chat = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.origin == "generated" and len(cal.records) == 6
    assert cal.n_calibration + cal.n_heldout == 6 and cal.n_heldout == 3
    assert cal.n_not_found == 0 and cal.corpus_fingerprint == "fp-1"
    generated = [h for h in chat.history if h["schema_name"] == "GeneratedQA"]
    judged = [h for h in chat.history if h["schema_name"] == "ContainsVerdict"]
    assert len(generated) == 6
    for rec in cal.records:
        q = bow(rec.question)
        sims = index.vectors.astype(float) @ q
        order = list(np.argsort(-sims, kind="stable"))
        # the walk stops at the source chunk at the latest, and the recorded numbers are its own
        assert rec.found and rec.rank <= order.index(rec.source_row) + 1
        assert rec.similarity == pytest.approx(sims[rec.positive_row])
        assert rec.top1 == pytest.approx(sims.max())
        assert rec.rank == order.index(rec.positive_row) + 1
        assert rec.judge_calls == rec.rank - 1  # every chunk above the positive was judged, none below
    assert len(judged) == sum(r.judge_calls for r in cal.records)
    # thresholds come from the calibration split with the finite-sample rank
    arrays = cal.arrays("calibration")
    for kind in ScoreKind:
        expected = conformal_quantile(positive_scores(kind, **arrays), 0.2)
        assert cal.threshold(kind) == expected
    assert {k["kind"] for k in cal.report["kinds"]} == {k.value for k in ScoreKind}
    assert cal.score_kind in {k.value for k in ScoreKind}
    assert "coverage" in format_report(cal)


def test_not_found_questions_are_counted_not_dropped(index):
    # every question asks about the beta toll, whatever chunk it came from; the judge never agrees
    llm, _ = scripted_llm(contains_says=lambda q, p: False, fixed_question="beta bridge toll coins carts walkers")
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=1, seed=1).run(questions=6)
    missing = [r for r in cal.records if not r.found]
    assert len(cal.records) == 6 and cal.n_not_found == len(missing) > 0
    toll_row = index.store.doc_rows("beta.md")[1]
    for r in cal.records:
        if r.source_row == toll_row:  # its own source is the top chunk: found without asking the judge
            assert r.found and r.rank == 1 and r.judge_calls == 0
        else:  # source beyond depth 1, and the judge said no to the top chunk
            assert not r.found and r.judge_calls == 1 and r.positive_row is None and r.similarity is None
    assert any("no chunk containing the answer" in n for n in cal.report["notes"])
    scores = positive_scores(ScoreKind.RAW, **cal.arrays(None))
    assert int(np.isinf(scores).sum()) == len(missing)


def test_qrels_calibration_set(index, tmp_path):
    queries = tmp_path / "queries.jsonl"
    qrels = tmp_path / "qrels.tsv"
    queries.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"_id": "q1", "text": "alpha reactor molten salt heat"},
                {"_id": "q2", "text": "beta bridge toll coins"},
                {"_id": "q3", "text": "gamma tulips bloom Frost"},
                {"_id": "q4", "text": "a question about a document that is not indexed"},
                {"_id": "q5", "text": "no qrels for me"},
            ]
        ),
        encoding="utf-8",
    )
    qrels.write_text(
        "query-id\tcorpus-id\tscore\nq1\talpha.md\t1\nq2\tbeta.md\t1\nq3\tgamma.md\t2\nq4\tmissing.md\t1\nq3\tbeta.md\t0\n",
        encoding="utf-8",
    )
    items = read_qrels(queries, qrels)
    assert sorted(i[0] for i in items) == ["q1", "q2", "q3", "q4"]
    cal = Calibrator(index, alpha=0.3, depth=6, seed=0).run(queries_path=queries, qrels_path=qrels)
    assert cal.origin == "qrels" and cal.n_not_found == 1
    by_id = {r.qid: r for r in cal.records}
    assert not by_id["q4"].found
    assert index.store.get(by_id["q1"].positive_row).doc_id == "alpha.md" and by_id["q1"].rank == 1
    assert index.store.get(by_id["q3"].positive_row).doc_id == "gamma.md"


def test_inputs_are_checked(index):
    llm, _ = scripted_llm()
    with pytest.raises(UsageError, match="alpha"):
        Calibrator(index, alpha=0.0)
    with pytest.raises(UsageError, match="questions"):
        Calibrator(index, llm=llm, prompts=PromptRenderer()).run(questions=1)
    with pytest.raises(UsageError, match="LLM"):
        Calibrator(index).run(questions=4)
    with pytest.raises(UsageError, match="score kind"):
        Calibrator(index, score_kind="best")


def test_calibration_records_the_hybrid_signal_of_the_best_known_positive(index):
    from ragsieve.tools.filters.conformal import hybrid_signal, ranks_of

    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.hybrid_k == 60
    for rec in cal.records:
        h = hybrid_signal(index.vectors.astype(float) @ bow(rec.question), index.bm25.scores(rec.question), 60)
        # known positives: the source chunk and the chunk the walk found; the better by the hybrid signal
        known = {rec.source_row, rec.positive_row}
        assert rec.hybrid_row in known and h[rec.hybrid_row] == max(h[r] for r in known)
        assert rec.hybrid == pytest.approx(h[rec.hybrid_row]) and rec.hybrid_top1 == pytest.approx(h.max())
        assert rec.hybrid_rank == ranks_of(h)[rec.hybrid_row]
    assert {"hybrid-rank", "hybrid-ratio"} <= {k["kind"] for k in cal.report["kinds"]}


def test_without_bm25_scores_only_dense_kinds_and_forcing_hybrid_is_refused(tmp_path):
    plain = TinyIndex(tmp_path, FACTS, bm25=False)
    llm, _ = scripted_llm()
    cal = Calibrator(plain, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.hybrid_k is None and all(r.hybrid is None for r in cal.records)
    assert {k["kind"] for k in cal.report["kinds"]} == {"raw", "gap", "ratio", "rank"}
    with pytest.raises(UsageError, match="calibrate again"):
        cal.threshold(ScoreKind.HYBRID_RANK)
    llm, _ = scripted_llm()
    with pytest.raises(UsageError, match="BM25"):
        Calibrator(plain, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1, score_kind="hybrid-rank").run(
            questions=6
        )
