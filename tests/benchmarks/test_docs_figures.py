"""The figures in docs/*.md between `<!-- fig:NAME -->` and `<!-- /fig -->` are generated from
benchmarks/results/*.json and current (the way tests/test_readme_figures.py keeps README's table current): a
changed result file makes the check fail and the rewrite follow it, a pipeline result of an earlier plan shows
as stale ("re-run it"), a missing file says so, and a bad marker is an error. No benchmark runs here."""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import docs_figures  # noqa: E402
import docs_markers as dm  # noqa: E402
import report_figure_rows  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DOCS = REPO / "docs"


def test_every_docs_page_with_figures_is_current():
    pages = docs_figures.pages(DOCS)
    assert {p.name for p in pages} >= {"quality.md", "full-plan.md"}
    shared = dm.Results(RESULTS)
    for page in pages:
        text, wanted = docs_figures.current(page, shared)
        assert text == wanted, f"{page.name}'s figures are stale: run `.venv/bin/python benchmarks/docs_figures.py`"


def test_every_figure_is_read_not_failed_and_every_name_is_used():
    used = set()
    for page in docs_figures.pages(DOCS):
        text = page.read_text(encoding="utf-8")
        used |= set(dm.names(text))
        for m in dm.MARK.finditer(text):
            assert "unreadable" not in m["body"], (page.name, m.group(0)[:200])
    assert used == set(dm.FIGURES), f"registered but unused: {set(dm.FIGURES) - used}"


@pytest.fixture()
def current_copy(tmp_path, monkeypatch):
    """A copy of the result files, every run treated as of the current plan (the figures themselves show)."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results, ignore=shutil.ignore_patterns("*.jsonl", "*.png"))
    monkeypatch.setattr(report_figure_rows, "result_predates", lambda *_a, **_k: False)
    return results


def _page(tmp_path: Path, body: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "p.md").write_text(body, encoding="utf-8")
    return docs


def test_every_figure_renders_from_the_files_it_names(current_copy):
    """With every run current, each marker of the real pages gives figures, never a 'not shown' note."""
    results = dm.Results(current_copy)
    for page in docs_figures.pages(DOCS):
        for m in dm.MARK.finditer(page.read_text(encoding="utf-8")):
            body = dm.render(m["name"], m["args"].split(), results)
            assert "not shown" not in body and re.search(r"\d", body), (page.name, m["name"], body)


def test_a_changed_result_file_makes_the_check_fail_and_the_rewrite_follows_it(tmp_path, current_copy, capsys):
    docs = _page(tmp_path, "# x\n\nSQuAD: <!-- fig:abstention -->old<!-- /fig -->.\n\n"
                           "<!-- fig:rse-table rse-long.json -->\nold\n<!-- /fig -->\n\nrest\n")
    args = ["--docs", str(docs), "--results", str(current_copy)]
    assert docs_figures.main(args) == 0
    assert docs_figures.main([*args, "--check"]) == 0
    text = (docs / "p.md").read_text(encoding="utf-8")
    assert "old" not in text and text.endswith("<!-- /fig -->\n\nrest\n")
    assert "\n\n| corpus | judge | with RSE | without RSE |\n" in text  # the block keeps its blank lines
    path = current_copy / "pipeline-abstention.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = data["sets"]["squad2"]["rows"]
    rows["oracle-flip25|full"]["abstain_unanswerable"] = rows["oracle-flip25|fast"]["abstain_unanswerable"] - 0.05
    path.write_text(json.dumps(data), encoding="utf-8")
    assert docs_figures.main([*args, "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    docs_figures.main(args)
    text = (docs / "p.md").read_text(encoding="utf-8")
    full = rows["oracle-flip25|full"]
    unanswerable = full["n"] - full["stage_n"]
    missed = round(0.05 * unanswerable)
    assert f"missed by {missed} of {unanswerable} questions" in text  # the comparison follows the numbers too


def test_the_comparison_words_follow_the_numbers(current_copy):
    """'as often as' becomes 'more often than' when the file says so; a target met reads as met."""
    path = current_copy / "fallback.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["sets"]["squad2"]["summary"]["ours"]["recall@2"] = 0.99
    data["sets"]["squad2"]["summary"]["answer_with_fallback"] = 0.5
    path.write_text(json.dumps(data), encoding="utf-8")
    body = dm.render("fallback", [], dm.Results(current_copy))
    assert "squad2 0.990 vs 0.948, more often than plain cosine" in body
    assert "lowered answer-in-context from 0.979 to 0.500" in body
    path = current_copy / "pipeline-abstention.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for row in data["sets"]["squad2"]["rows"].values():
        row["abstain_unanswerable"] = 0.5
    path.write_text(json.dumps(data), encoding="utf-8")
    body = dm.render("abstention", [], dm.Results(current_copy))
    assert "missed" not in body and body.count("at least as often as `fast` on unanswerable ones (the target)") == 3


def test_a_run_of_an_earlier_plan_shows_stale_and_a_missing_file_says_so(tmp_path, current_copy, monkeypatch):
    old = current_copy / "pipeline-ablation-hotpotqa-oracle.json"  # this copy ran an earlier plan
    data = json.loads(old.read_text(encoding="utf-8"))
    data["commit"] = "8945381" + "0" * 33
    old.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(report_figure_rows, "result_predates", lambda data: str(data["commit"]).startswith("8945381"))
    (current_copy / "fallback.json").unlink()
    docs = _page(tmp_path, "a <!-- fig:chain hotpotqa oracle -->x<!-- /fig -->, b <!-- fig:chain squad2 oracle -->"
                           "x<!-- /fig -->, c <!-- fig:fallback -->x<!-- /fig -->, d <!-- fig:rse-whole rse-long-whole.json"
                           " -->x<!-- /fig -->\n")
    docs_figures.main(["--docs", str(docs), "--results", str(current_copy)])
    text = (docs / "p.md").read_text(encoding="utf-8")
    assert ("a <!-- fig:chain hotpotqa oracle -->(not shown: `pipeline-ablation-hotpotqa-oracle.json` ran an "
            "earlier `full` plan (at 8945381): re-run it)<!-- /fig -->") in text
    assert re.search(r"b <!-- fig:chain squad2 oracle -->\d\.\d{3} → \d\.\d{3}", text)  # the current plan's run shows
    assert "c <!-- fig:fallback -->(not shown: `fallback.json` not run)<!-- /fig -->" in text
    assert re.search(r"d <!-- fig:rse-whole rse-long-whole.json -->answered \d\.\d{3}", text)  # only pipeline runs go by plan


def test_a_file_without_what_the_figure_reads_says_unreadable(current_copy):
    (current_copy / "rse-long-whole.json").write_text('{"corpora": {}}', encoding="utf-8")
    body = dm.render("rse-whole", ["rse-long-whole.json"], dm.Results(current_copy))
    assert body.startswith("(not shown: `rse-long-whole.json` unreadable, StopIteration")


@pytest.mark.parametrize("page, error", [
    ("a <!-- fig:nosuch -->x<!-- /fig -->\n", "unknown figure 'nosuch'"),
    ("a <!-- fig:chain hotpotqa -->x<!-- /fig -->\n", "with arguments"),
    ("a <!-- fig:abstention -->x\n", "unbalanced"),
    ("a <!-- fig:abstention -->x <!-- fig:abstention -->y<!-- /fig -->\n", "unbalanced"),
    ("<!-- fig:abstention -->x<!-- /fig --> starts a line\n", "starts a line"),
    ("- item\n  <!-- fig:abstention -->x<!-- /fig --> indented in a list\n", "starts a line"),
])
def test_a_bad_marker_is_an_error_and_the_page_is_left_alone(tmp_path, page, error, capsys):
    docs = _page(tmp_path, page)
    with pytest.raises(ValueError, match=error):
        docs_figures.rewrite(docs, RESULTS)
    assert docs_figures.main(["--docs", str(docs), "--results", str(RESULTS)]) == 2
    assert (docs / "p.md").read_text(encoding="utf-8") == page
    assert error.split("'")[0] in capsys.readouterr().err


def test_the_markers_render_invisibly_and_the_figures_as_markdown():
    """CommonMark (markdown-it) turns each marker into an HTML comment and nothing else: no generated text
    becomes raw HTML (which shows backticks as they are), the way a marker starting a line in a paragraph would."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the markdown (rich brings it)")
    marker = re.compile(r"^<!-- (fig:[a-z0-9-]+(?: [A-Za-z0-9_.+-]+)*|/fig) -->$")
    for page in docs_figures.pages(DOCS):
        tokens = markdown_it.MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
        html = [t.content.strip() for t in tokens if t.type == "html_block"]
        html += [c.content.strip() for t in tokens for c in (t.children or []) if c.type == "html_inline"]
        assert html and all(marker.match(h) for h in html), [h[:120] for h in html if not marker.match(h)][:3]
        shown = markdown_it.MarkdownIt("commonmark").render(page.read_text(encoding="utf-8"))
        assert "<!-- fig:" in shown and not re.search(r"\bfig:", re.sub(r"<!--.*?-->", "", shown))  # not "Config:"


def test_report_py_rewrites_the_docs_figures_too(tmp_path, current_copy):
    import report

    docs = _page(tmp_path, "x <!-- fig:gmm-stage -->old<!-- /fig -->\n")
    out = tmp_path / "REPORT.md"
    assert report.main(["--results", str(current_copy), "--out", str(out), "--docs", str(docs)]) == 0
    assert out.exists() and "it raised gold recall for" in (docs / "p.md").read_text(encoding="utf-8")
    (docs / "p.md").write_text("x <!-- fig:gmm-stage -->old<!-- /fig -->\n", encoding="utf-8")
    report.main(["--results", str(current_copy), "--out", str(out), "--docs", str(docs), "--no-docs"])
    assert "old" in (docs / "p.md").read_text(encoding="utf-8")
