"""benchmarks/report.py and benchmarks/staleness.py: README's headline table checked against its result files,
staleness read from git (a result is current while the files it measures are unchanged since its commit),
REPORT.md's rows."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import report, staleness

REPO = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True).stdout.strip()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_readme_table_agrees_with_the_result_files():
    """The check `make test` runs: every README figure is what its result file gives today."""
    assert report.main(["--check"]) == 0


def test_a_readme_figure_that_disagrees_with_its_file_fails_the_check_and_a_stale_one_does_not(tmp_path):
    results = tmp_path / "results"
    _write(
        results / "cli-search.json",
        json.dumps(
            {
                "command": "python -m benchmarks.retrieval.cli_search",
                "commit": "0" * 40,
                "chunks": 8013,
                "cpus": 2,
                "median_s": 1.9,
                "median_cpu_s": 1.03,
                "target_s": 3,
                "machine": {"cpus": 2},
            }
        ),
    )
    readme = tmp_path / "README.md"
    _write(readme, f"# x\n\n{report.BEGIN}\nold\n{report.END}\n\nafter\n")
    args = ["--results", str(results), "--readme", str(readme), "--report", str(tmp_path / "REPORT.md")]
    assert report.main([*args, "--check"]) == 1  # the block is not what the files give
    assert report.main(args) == 0
    text = readme.read_text(encoding="utf-8")
    assert "median 1.90 s wall, 1.03 s CPU" in text and text.endswith("\nafter\n")
    assert "[`cli-search.json`](benchmarks/REPORT.md#row-cli-search) at 0000000" in text
    assert "| **speed** |" in text and "`retrieval_scifact.json` (missing)" in text  # files not run say so
    assert report.main([*args, "--check"]) == 0  # its commit is unknown (stale or not): only figures count
    readme.write_text(text.replace("median 1.90 s", "median 1.20 s"), encoding="utf-8")
    assert report.main([*args, "--check"]) == 1
    shown = (tmp_path / "REPORT.md").read_text(encoding="utf-8")
    assert '<a id="row-cli-search"></a>`cli-search.json`' in shown and "commit 0000000 unknown here" in shown
    assert "| [cli-search](#fig-cli-search) |" in shown  # the file's row links the README figure it backs


@pytest.fixture
def history(tmp_path):
    """A repository: agent/x.py, tools/y.py and benchmarks/fam/m.py at `first`; then agent/x.py edited and the
    benchmark moved to benchmarks/other/m.py with only its import line changed, at HEAD."""
    repo = tmp_path / "repo"
    _write(repo / "agent" / "x.py", "A = 1\n")
    _write(repo / "tools" / "y.py", "B = 1\n")
    body = "".join(f"run({i})  # measured step {i}\n" for i in range(12))  # git pairs a rename by similarity
    _write(repo / "benchmarks" / "fam" / "m.py", "from fam_helpers import run\n\n" + body)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    first = _git(repo, "rev-parse", "HEAD")
    _write(repo / "agent" / "x.py", "A = 2\n")
    (repo / "benchmarks" / "other").mkdir()
    _git(repo, "mv", "benchmarks/fam/m.py", "benchmarks/other/m.py")
    _write(repo / "benchmarks" / "other" / "m.py", "from benchmarks.other.helpers import run\n" + body)
    _write(repo / "benchmarks" / "other" / "__init__.py", "")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "second")
    return repo, first


def test_a_result_is_stale_once_a_file_it_measures_changed_and_current_otherwise(history):
    repo, first = history
    git = staleness.Git(repo)
    assert git.changed(first, ["agent/"]) == ["agent/x.py"]
    assert git.changed(first + "+dirty", ["agent/x.py", "tools/"]) == ["agent/x.py"]
    assert git.changed(first, ["tools/y.py"]) == []
    # a move that only fixes imports (and a new package marker) leaves what the benchmark measures unchanged
    assert git.changed(first, ["benchmarks/"]) == []
    assert git.changed("f" * 40, ["agent/"]) is None and git.changed("not-a-sha", ["agent/"]) is None
    moved = repo / "benchmarks" / "other" / "m.py"
    moved.write_text(moved.read_text(encoding="utf-8").replace("run(3)", "run(30)"), encoding="utf-8")
    _git(repo, "commit", "-qam", "third")  # a real edit of the moved benchmark
    assert staleness.Git(repo).changed(first, ["benchmarks/"]) == ["benchmarks/other/m.py"]


def test_a_reformatted_file_is_not_a_change_and_an_edit_is(tmp_path):
    repo = tmp_path / "repo"
    _write(repo / "tools" / "z.py", "x = [1, 2]\ny = 'a'\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    first = _git(repo, "rev-parse", "HEAD")
    _write(repo / "tools" / "z.py", 'x = [\n    1,\n    2,\n]\ny = "a"\n')  # what `ruff format` does: the same tree
    _git(repo, "commit", "-qam", "format")
    git = staleness.Git(repo)
    assert git.changed(first, ["tools/"]) == []
    git.close()
    _write(repo / "tools" / "z.py", 'x = [1, 3]\ny = "a"\n')
    _git(repo, "commit", "-qam", "edit")
    assert staleness.Git(repo).changed(first, ["tools/"]) == ["tools/z.py"]


def test_the_report_shows_stale_and_current_rows_from_headers_or_family_defaults(history, tmp_path):
    repo, first = history
    results = tmp_path / "results"
    _write(results / "a.json", json.dumps({"command": "python -m benchmarks.fam.m", "commit": first, "measures": ["agent/x.py"]}))
    _write(
        results / "b.json",
        json.dumps(
            {
                "command": "python -m benchmarks.fam.m --b",
                "commit": first,
                "measures": ["tools/"],
                "promises": [
                    {
                        "promise": "p holds",
                        "judge": "oracle",
                        "holds": False,
                        "statistic": "0.91 vs 0.95",
                        "n": 60,
                        "why": "one s.e. short",
                    }
                ],
            }
        ),
    )
    _write(results / "pipeline-old.json", json.dumps({"command": "python benchmarks/pipeline.py", "commit": first}))
    _write(results / "pipeline-old.questions.jsonl.gz", "")
    _write(results / "broken.json", "{not json")
    loaded = {r.name: r for r in report.load(results)}
    assert loaded["pipeline-old.json"].measures == staleness.family("pipeline-old.json")[1]
    assert loaded["pipeline-old.json"].detail == ["pipeline-old.questions.jsonl.gz"]
    assert loaded["a.json"].measures == ["agent/x.py"]
    text = report.render(loaded, staleness.Git(repo))
    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith('| <a id="row-')}
    assert "**stale**: `agent/x.py`" in rows["a.json"]
    assert "| current |" in rows["b.json"]
    assert "**stale**: `agent/x.py`" in rows["pipeline-old.json"]  # the pipeline family measures agent/
    assert "+ `pipeline-old.questions.jsonl.gz`" in rows["pipeline-old.json"]
    assert "unreadable (JSONDecodeError)" in rows["broken.json"]
    assert "| p holds | oracle | **no** | 0.91 vs 0.95 | 60 | one s.e. short | [`b.json`](#row-b) | current |" in text


def test_every_docs_link_to_a_report_row_names_a_row_that_exists(tmp_path):
    """Docs pages state methods and link to REPORT.md's rows; each anchor they use is one REPORT.md has."""
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    out = tmp_path / "REPORT.md"
    assert report.main(["--readme", str(tmp_path / "README.md"), "--report", str(out)]) == 0
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', out.read_text(encoding="utf-8")))
    linked = set()
    for page in (REPO / "docs").glob("*.md"):
        linked |= set(re.findall(r"REPORT\.md#([a-z0-9-]+)", page.read_text(encoding="utf-8")))
    assert linked and linked <= anchors, sorted(linked - anchors)
