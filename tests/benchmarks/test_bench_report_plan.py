"""REPORT.md never shows a pipeline result that ran an earlier `full` plan as current: `report_plan.predates_plan`
on a real git history, and the report's loader and targets table on a result file it flags."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "add", name], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", name], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture()
def history(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    old = _commit(repo, "before")
    change = _commit(repo, "plan-change")
    later = _commit(repo, "after")
    return repo, old, change, later


def test_a_commit_without_the_plan_change_predates_it_and_one_with_it_does_not(history):
    from report_plan import predates_plan

    repo, old, change, later = history
    assert predates_plan(old, since=change, repo=repo)
    assert predates_plan(old[:7] + "+dirty", since=change, repo=repo)  # a dirty run of the old code
    assert not predates_plan(change, since=change, repo=repo)
    assert not predates_plan(later + "+dirty", since=change, repo=repo)
    # what git cannot place is not judged: another clone's commit, a fixture's, none at all
    assert not predates_plan("0123456789abcdef0123456789abcdef01234567", since=change, repo=repo)
    assert not predates_plan("", since=change, repo=repo)
    assert not predates_plan(old, since="feedfacefeedfacefeedfacefeedfacefeedface", repo=repo)


def test_the_report_names_a_predating_embedded_run_and_counts_none_of_its_figures(tmp_path, monkeypatch):
    import report
    import report_files
    from report_headline import embedded_lines
    from report_plan import PREDATES
    from report_targets import targets_section

    monkeypatch.setattr(report_files, "result_predates", lambda data: str(data["commit"]).startswith("old"))
    rows = [{"dataset": s, "judge": "embedded-0.5b", "plan": p, "n": 50, "gold_recall": 0.9}
            for s in ("squad2", "hotpotqa") for p in ("fast", "full")]
    (tmp_path / "pipeline-embedded-current.json").write_text(json.dumps({"commit": "new1", "command": "c",
                                                                         "rows": rows}))
    stale = [{**r, "dataset": "scifact", "gold_recall": 0.123} for r in rows[:2]]
    (tmp_path / "pipeline-embedded-scifact.json").write_text(json.dumps({"commit": "old1234", "command": "c",
                                                                         "rows": stale}))
    (tmp_path / "retrieval_old.json").write_text(json.dumps({"commit": "old9", "command": "c"}))

    loaded = {p.name: (d, e) for p, d, e in report.load(tmp_path, "*.json")}
    assert loaded["pipeline-embedded-scifact.json"][0] is None
    assert loaded["pipeline-embedded-scifact.json"][1].startswith(PREDATES)
    assert loaded["retrieval_old.json"][0] is not None  # only pipeline results measure the plan

    table = "\n".join(targets_section(tmp_path, report.load))
    row = next(r for r in table.splitlines() if r.startswith("| embedded 0.5B rows"))
    assert "hotpotqa n 50; squad2 n 50" in row and "scifact n" not in row
    assert f"{PREDATES}: `pipeline-embedded-scifact.json`" in row and "| **no** |" in row
    headline = "\n".join(embedded_lines(tmp_path, report.load, lambda d: d["command"]))
    assert "0.123" not in headline and "| scifact |" not in headline
    assert "Not shown: `pipeline-embedded-scifact.json` " + PREDATES in headline


def test_only_runs_that_measured_their_judge_are_held_to_the_judge_change(history, monkeypatch):
    """`JUDGE_SINCE` (judges barred on their measured decoy rate) changes only runs with a measured judge: an
    embedded run with `--judge-questions 0` between the two changes stays current, a measured one does not."""
    import report_plan

    repo, old, change, later = history
    monkeypatch.setattr(report_plan, "PLAN_SINCE", change)
    monkeypatch.setattr(report_plan, "JUDGE_SINCE", later)
    real = report_plan.predates_plan
    monkeypatch.setattr(report_plan, "predates_plan", lambda commit, since: real(commit, since, repo))
    unmeasured = {"commit": change, "command": "python benchmarks/pipeline.py --judges embedded-0.5b --judge-questions 0"}
    measured = {"commit": change, "command": "python benchmarks/pipeline.py --judges oracle-flip25 --judge-questions 60"}
    default = {"commit": change, "command": "python benchmarks/pipeline.py --judges oracle"}  # default 60
    assert not report_plan.result_predates(unmeasured)
    assert report_plan.result_predates(measured) and report_plan.result_predates(default)
    assert not report_plan.result_predates({**measured, "commit": later})
    assert report_plan.result_predates({**unmeasured, "commit": old})  # the earlier change still applies
    assert report_plan.measures_judge("x --judge-questions=0") is False
