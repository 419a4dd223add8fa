"""README.md's headline figures table is generated from benchmarks/results/*.json and current, REPORT.md opens
with the same table, and the generator reports a missing or changed result file instead of keeping old figures
(the way tests/test_architecture.py keeps docs/architecture.md's picture current). No benchmark runs here."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import readme_figures  # noqa: E402
import report_figures as rf  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def test_readme_figures_block_is_current():
    text, wanted = readme_figures.current(REPO / "README.md", RESULTS)
    assert text == wanted, "README.md's figures are stale: run `.venv/bin/python benchmarks/readme_figures.py`"


def test_readme_figures_are_on_its_first_two_screens():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    begin = lines.index(rf.BEGIN)
    assert begin < 60 and lines.index(rf.END) < 100, "the figures table belongs on README's first two screens"


def test_report_opens_with_the_same_table():
    report = (REPO / "benchmarks" / "REPORT.md").read_text(encoding="utf-8").splitlines()
    table = rf.figures_table(RESULTS)
    start = report.index(table[0])
    assert start < 10, "REPORT.md's first screen is the product figures table"
    assert report[start:start + len(table)] == table, "REPORT.md is stale: run `.venv/bin/python benchmarks/report.py`"


def test_every_row_names_its_files_and_commit_and_the_proxies_say_so():
    rows = rf.figures(RESULTS)
    assert len(rows) >= 12
    for _area, fig, source in rows:
        assert fig.ours not in ("not run",) and not fig.ours.startswith("unreadable"), (fig, source)
        assert all(f"`{f}` at " in source for f in fig.files), source
        if fig.ours.startswith("ran an earlier"):  # a result of an earlier plan shows no figure, only that it is stale
            assert fig.ours.endswith("re-run it") and not fig.beside, fig
    measures = " ".join(fig.measure for _, fig, _ in rows)
    assert [area for area, _, _ in rows] == sorted((a for a, _, _ in rows), key=["quality", "speed", "size"].index)
    stale = [fig for _, fig, _ in rows if fig.ours.startswith("ran an earlier")]
    assert "oracle" in measures and "fake LLM" in measures and "stand-in" in measures
    assert "a sample" in measures or any("embedded" in fig.measure for fig in stale)  # the 0.5B rows are samples


@pytest.fixture()
def copy(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results, ignore=shutil.ignore_patterns("*.jsonl", "*.png"))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{rf.BEGIN}\nold figures\n{rf.END}\n\nrest\n", encoding="utf-8")
    return readme, results


def test_a_changed_result_file_makes_the_check_fail_and_the_rewrite_follows_it(copy, capsys):
    readme, results = copy
    assert readme_figures.main(["--readme", str(readme), "--results", str(results)]) == 0
    assert readme_figures.main(["--readme", str(readme), "--results", str(results), "--check"]) == 0
    path = results / "retrieval_scifact.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["methods"]["hybrid_weighted"]["ndcg@10"] = 0.5
    path.write_text(json.dumps(data), encoding="utf-8")
    assert readme_figures.main(["--readme", str(readme), "--results", str(results), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    readme_figures.main(["--readme", str(readme), "--results", str(results)])
    text = readme.read_text(encoding="utf-8")
    assert "**0.500** hybrid" in text and text.endswith(f"{rf.END}\n\nrest\n") and "old figures" not in text


def test_a_missing_or_malformed_file_is_a_row_saying_so(copy):
    _readme, results = copy
    (results / "cli-search.json").unlink()
    (results / "install-size.json").write_text('{"variants": {}}', encoding="utf-8")
    rows = {fig.files[0]: fig for _, fig, _ in rf.figures(results)}
    assert rows["cli-search.json"].ours == "not run"
    assert rows["install-size.json"].ours.startswith("unreadable (KeyError")


def test_markers_must_be_there_once(tmp_path):
    with pytest.raises(ValueError, match="expected one"):
        rf.replace_block("no markers here", ["x"])
    readme = tmp_path / "README.md"
    readme.write_text("# nothing\n", encoding="utf-8")
    assert readme_figures.main(["--readme", str(readme), "--results", str(RESULTS), "--check"]) == 2
