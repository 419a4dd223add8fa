"""docs/access.md's filtered-search figures are generated from benchmarks/results/access*.json and current;
the generator reads every row it is given (no benchmark runs here)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import access_doc  # noqa: E402


def test_access_page_figures_are_current():
    text, wanted = access_doc.current(REPO / "docs" / "access.md", REPO / "benchmarks" / "results")
    assert text == wanted, "docs/access.md's figures are stale: run `.venv/bin/python benchmarks/access_doc.py`"


def test_a_changed_result_changes_the_page(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    row = {"backend": "local", "faiss": "hnsw", "chunks": 100000, "readable_fraction": 0.5, "p50_ratio": 1.234,
           "unfiltered_p50_ms": 1.55,
           "recall@10_vs_exact_filtered": 0.9975, "unfiltered_recall@10_vs_exact": 1.0, "first_query_ms": 142.7,
           "filtered_dense": "graph walk, efSearch 517"}
    (results / "access.json").write_text(json.dumps({"command": "python benchmarks/access.py", "commit": "abc1234def",
                                                     "load_average_at_start": [2.5], "rows": [row]}))
    page = tmp_path / "access.md"
    page.write_text(f"intro\n{access_doc.BEGIN}\nold\n{access_doc.END}\nrest\n")
    assert access_doc.main(["--page", str(page), "--results", str(results), "--check"]) == 1
    assert access_doc.main(["--page", str(page), "--results", str(results)]) == 0
    text = page.read_text()
    assert "| local hnsw, 100k | 1.6 / – / – | 1.23× / – / – | 0.9975 / – / – | 1.0 / – / – | 143 / – / – |" in text
    assert "50.0% readable by graph walk, efSearch 517" in text and text.startswith("intro\n") and text.endswith("rest\n")
    assert access_doc.main(["--page", str(page), "--results", str(results), "--check"]) == 0
