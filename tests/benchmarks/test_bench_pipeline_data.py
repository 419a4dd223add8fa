"""The stage ablation's helpers (`benchmarks/pipeline/data/`, `benchmarks/pipeline/rows.py`): the calibration
copies' held-out record, resuming from a checkpoint, and per-fold coverage (pure functions, no index)."""

from __future__ import annotations

import json

import pytest


def test_a_calibrated_copy_is_reused_only_for_questions_it_was_calibrated_without(tmp_path):
    from benchmarks.pipeline.data.folds import _held_out_covers

    assert _held_out_covers(tmp_path, {"a", "b"})  # a copy from before the record: trusted
    (tmp_path / "held-out.json").write_text(json.dumps(["a", "b", "c"]))
    assert _held_out_covers(tmp_path, {"a", "b"})
    assert not _held_out_covers(tmp_path, {"a", "d"})  # "d" was a calibration question of that copy


def test_a_run_needing_other_held_out_questions_gets_its_own_calibrated_copy(tmp_path):
    """Two runs sharing --index-root: a copy that does not hold out every question now evaluated is left for
    the run using it, and a sibling keyed by the held-out set is used instead (same set, same sibling)."""
    from benchmarks.pipeline.data.folds import _held_out_covers, copy_for

    plain = tmp_path / "squad2-cal0"
    plain.mkdir()
    (plain / "held-out.json").write_text(json.dumps(["a", "b"]))

    def usable(target, evaluated):
        return target.is_dir() and _held_out_covers(target, evaluated)

    assert copy_for(plain, {"a"}, usable) == plain
    other = copy_for(plain, {"a", "d"}, usable)
    assert other.parent == plain.parent and other != plain and other.name.startswith("squad2-cal0-")
    assert copy_for(plain, {"d", "a"}, usable) == other != copy_for(plain, {"a", "e"}, usable)


def test_pipeline_resume_reuses_checkpoint_rows_only_when_every_plan_is_there(tmp_path):
    import argparse

    from benchmarks.pipeline import rows as pipeline

    ckpt = tmp_path / "rows.jsonl"
    rows = [
        {"dataset": "squad2", "judge": "j", "plan": "fast", "qid": "a", "abstained": True},
        {"dataset": "squad2", "judge": "j", "plan": "full", "qid": "a", "abstained": False},
        {"dataset": "squad2", "judge": "j", "plan": "fast", "qid": "b"},  # full missing: asked again
        {"dataset": "hotpotqa", "judge": "j", "plan": "fast", "qid": "c"},
        {"dataset": "squad2", "judge": "other", "plan": "fast", "qid": "d"},
    ]
    ckpt.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"cut', encoding="utf-8")
    args = argparse.Namespace(checkpoint=str(ckpt), resume=True)
    done = pipeline.resumed(args, "squad2", "j", ["fast", "full"])
    assert set(done) == {("a", "fast"), ("a", "full"), ("b", "fast")}
    assert done["a", "full"]["abstained"] is False
    assert pipeline.resumed(argparse.Namespace(checkpoint=str(ckpt), resume=False), "squad2", "j", ["fast"]) == {}
    # a resumed run states which commit wrote the rows it reused; rows from before rows named it say so
    assert pipeline.row_commits([{"commit": "c1"}, {"commit": "c1"}, {"qid": "x"}, {"commit": "c2+dirty"}]) == {
        "c1": 2,
        "unrecorded": 1,
        "c2+dirty": 1,
    }


def test_per_fold_coverage_and_its_target_by_hand():
    """`per_fold` (issue 46): per-gold coverage per calibration fold on answerable questions only, with the
    target 1 - alpha - 2 s.e. at that fold's n; unanswerable rows and rows without gold are left out."""
    from benchmarks.pipeline.rows import per_fold

    def row(fold, recall, impossible=False, rule="auto: relevant", kept=1.0):
        return {
            "fold": fold,
            "gold_recall": recall,
            "impossible": impossible,
            "rule": rule,
            "members_kept": kept,
            "coverage_guaranteed": True,
        }

    rows = (
        [row(0, 1.0)] * 3
        + [row(0, 0.5), row(0, None, impossible=True)]
        + [row(1, 0.0, rule="auto: union", kept=0.0), row(1, 1.0, rule="auto: union")]
    )
    out = per_fold(rows, alpha=0.1)
    assert out["0"]["n"] == 4 and out["0"]["per_gold"] == pytest.approx(3.5 / 4) and out["0"]["any_gold"] == 1.0
    assert out["0"]["target"] == round(0.9 - 2 * (0.09 / 4) ** 0.5, 4) == 0.6
    assert out["1"]["per_gold"] == 0.5 and out["1"]["any_gold"] == 0.5 and out["1"]["members_kept"] == 0.5
    assert out["0"]["rules"] == {"auto: relevant": 4} and out["1"]["rules"] == {"auto: union": 2}
