"""benchmarks/report.py renders result files: the retrieval, agentic, eval and conformal tables, the commands
that made them, and 'not run' for what is missing."""
from __future__ import annotations

import json


def test_benchmark_report_names_commands_and_says_not_run(tmp_path):
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    (tmp_path / "retrieval_scifact.json").write_text(json.dumps({
        "command": "python benchmarks/retrieval.py", "dataset": "../shared/data/scifact",
        "machine": {"nproc": 2, "platform": "Linux-x", "python": "3.11.9"},
        "methods": {"bm25s": {"ndcg@10": 0.6543, "recall@100": 0.9, "latency_ms_p50": 0.7}}}))
    (tmp_path / "agentic.json").write_text(json.dumps({
        "command": "python benchmarks/agentic.py --limit 5", "machine": {"cpus": 2, "python": "3.11.9"},
        "sets": {"hotpotqa": {"summary": {"fast": {"f1": 0.25, "calls_per_q": 1.0}}, "rows": [{"f1": 9.0}]}}}))
    (tmp_path / "filters-broken.json").write_text("{not json")
    (tmp_path / "eval_squad2.json").write_text(json.dumps({
        "command": "ragsieve eval squad2 --plan fast", "machine": {"cpu": "EPYC", "cpus": 2, "python": "3.11.9"},
        "dataset": {"folder": "../shared/data/squad2"},
        "plans": {"fast": {"questions": 6, "retrieval": {"fs_ndcg@10": 0.5, "n_fs_ndcg@10": 4},
                           "answers": {"f1": 0.75}, "cost": {"calls": 1.0, "wall_p50_s": 2.0}}}}))
    text = report.render(tmp_path)
    assert "| BM25, Elasticsearch multifield | 0.665 |" in text and "| BM25, Pyserini flat index | 0.679 |" in text
    assert "| ours: bm25s (retrieval_scifact.json) | 0.654 | 0.900 | 0.700 | `python benchmarks/retrieval.py` (no commit recorded) | Linux-x, 2 cpus" in text
    assert "### hotpotqa (agentic.json)" in text
    assert "| fast | 1.000 | 0.250 | `python benchmarks/agentic.py --limit 5` | 2 cpus, Python 3.11.9 |" in text
    assert "9.000" not in text  # per-question rows are not figures
    assert "filters-broken.json" in text and "unreadable" in text
    assert ("| squad2 / fast (eval_squad2.json) | 6 (4 judged) | 0.500 | – | – | – | – | – | 0.750 | – | – | 1.000 | "
            "2.000 | `ragsieve eval squad2 --plan fast` (no commit recorded) | EPYC, 2 cpus, Python 3.11.9 |") in text
    empty = report.render(tmp_path / "nothing")
    assert "not run (no benchmarks/results/agentic*.json)" in empty and "Our SciFact numbers: not run" in empty
    assert "not run (no benchmarks/results/filters*.json)" in empty and "eval*.json besides the SciFact" in empty


def test_benchmark_report_conformal_table(tmp_path):
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("bench_report_c", REPO / "benchmarks" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    kinds = {k: {"coverage_mean": c, "mean_kept": m} for k, c, m in
             [("raw", 0.9, 16.0), ("gap", 0.91, 4.0), ("ratio", 0.89, 4.5), ("rank", 0.9, 7.0)]}
    (tmp_path / "filters-c.json").write_text(json.dumps({
        "command": "python benchmarks/filters.py --part conformal", "machine": {"cpus": 2},
        "conformal": {"alphas": {"0.1": {"target": 0.9, "tolerance": 0.027, "kinds": kinds,
                                         "fixed_top_k_at_equal_coverage": [5, 6], "smallest_vs_raw": 0.25,
                                         "n_calibration": 500, "n_heldout": 500}}}}))
    text = report.render(tmp_path)
    row = next(line for line in text.splitlines() if line.startswith("| 0.1 |"))
    assert "0.900 / 16.000" in row and "0.910 / 4.000" in row and "| 5.500 |" in row
    assert "python benchmarks/filters.py --part conformal" in row
