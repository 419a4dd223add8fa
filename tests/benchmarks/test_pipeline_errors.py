"""`benchmarks/pipeline/main.py --interleave`: a question whose ask raises becomes an error row (checkpointed, retried on
--resume, left out of every plan's summary so rows stay paired), and a run stops asking after --max-errors of them
instead of aborting with nothing written."""

from __future__ import annotations

import argparse
import json

from benchmarks.pipeline import run as pipeline_run  # noqa: E402


def _questions(n):
    return [{"id": f"q{i}", "impossible": False} for i in range(n)]


def _row(q, plan, recall):
    return {
        "dataset": "s",
        "judge": "j",
        "plan": plan,
        "qid": q["id"],
        "impossible": q["impossible"],
        "gold_recall": recall,
        "both_gold": None,
        "context_chunks": 3,
        "context_tokens": 100,
        "llm_calls": 1,
        "seconds": 0.1,
        "em": None,
        "f1": None,
        "abstained": False,
        "abstention": "model",
        "rule": "-",
    }


def _run(monkeypatch, tmp_path, n, failing, max_errors=3, resume=False):
    asked = []

    def ask(q, plan, *a):
        asked.append((q["id"], plan))
        if (q["id"], plan) in failing:
            raise RuntimeError(f"context window exceeded on {q['id']}")
        return _row(q, plan, 1.0 if plan == "full" else 0.0)

    monkeypatch.setattr(pipeline_run, "ask_row", ask)
    args = argparse.Namespace(budget_s=None, max_errors=max_errors, checkpoint=str(tmp_path / "rows.jsonl"), resume=resume)
    report = {"commit": "abc", "sets": {"s": {"rows": {}}}}
    out: list[dict] = []
    pipeline_run.interleaved("s", _questions(n), {}, None, None, "j", ["fast", "full"], args, out, report)
    return report["sets"]["s"], out, asked


def test_a_raising_question_is_an_error_row_and_left_out_of_every_plan(monkeypatch, tmp_path):
    got, out, asked = _run(monkeypatch, tmp_path, 6, {("q2", "full")})
    assert len(asked) == 12  # the run went on past the fault
    for plan in ("fast", "full"):
        assert got["rows"][f"j|{plan}"]["n"] == 5  # q2 left out of both plans: still paired
        assert got["rows"][f"j|{plan}"]["budget_stopped"] is False
    assert got["rows"]["j|full"]["gold_recall"] == 1.0 and got["rows"]["j|fast"]["gold_recall"] == 0.0
    assert got["errors"]["j"] == [{"qid": "q2", "plan": "full", "error": "RuntimeError: context window exceeded on q2"}]
    assert {r["qid"] for r in out} == {"q0", "q1", "q3", "q4", "q5"}
    ckpt = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(ckpt) == 12 and all(r["commit"] == "abc" for r in ckpt)
    assert [r["qid"] for r in ckpt if "error" in r] == ["q2"]


def test_resume_asks_an_errored_question_again_and_reuses_the_rest(monkeypatch, tmp_path):
    _run(monkeypatch, tmp_path, 4, {("q1", "fast")})
    got, out, asked = _run(monkeypatch, tmp_path, 4, set(), resume=True)
    assert asked == [("q1", "fast"), ("q1", "full")]  # only the question that raised
    assert got["rows"]["j|fast"]["n"] == 4 and "errors" not in got
    assert got["resumed_rows"] == {"abc": 6}


def test_the_run_stops_asking_after_max_errors(monkeypatch, tmp_path):
    failing = {(f"q{i}", p) for i in range(10) for p in ("fast", "full")}  # an endpoint that is down
    got, out, asked = _run(monkeypatch, tmp_path, 10, failing, max_errors=2)
    assert len(asked) == 4  # two questions (each counted once, though both plans raised), then no new one
    assert got["rows"]["j|fast"]["budget_stopped"] == "errors" and got["rows"]["j|fast"]["n"] == 0
    assert len(got["errors"]["j"]) == 4
