"""docs/sources.md's figure functions (`benchmarks/docs_figures_sources.py`) render what small synthetic result
files hold, say whether a target is met from the numbers, and say so when a file is missing. No benchmark runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import docs_figures  # noqa: E402,F401  (registers every figure)
import docs_markers as dm  # noqa: E402


def _write(folder: Path, name: str, data: dict) -> None:
    (folder / name).write_text(json.dumps(data), encoding="utf-8")


def _row(r5: float, within: float, passages: float, tokens: int, ident: float, r1: float = 0.3) -> dict:
    return {"recall@1": r1, "recall@5": r5, "recall@10": 0.8, "mrr": 0.45, "gold_within_1000_tokens": within,
            "top5_after_stitching": {"passages_mean": passages, "tokens_mean": tokens, "gold_share": 0.7},
            "identifier_queries": 40, "identifier_rank1_rate": ident}


def _code(r5: float) -> dict:
    return {"commit": "feedbee0", "command": "python benchmarks/sources.py --parts code",
            "load_average_at_end": [1.5, 1, 1],
            "code": {"modules": ["a.py", "b.py"], "queries": 100, "chunks": 1200, "build_s": 12.34,
                     "symbols_on": _row(r5, 0.75, 5.0, 1100, 0.9), "symbols_off": _row(0.69, 0.74, 5.0, 1090, 0.7),
                     "collapse_off": _row(0.69, 0.75, 4.5, 1000, 0.9),
                     "run": {"commit": "feedbee0", "encoder": "onnx-int8", "load_average_at_start": [0.125, 0, 0]}}}


def test_the_code_target_and_its_margin_follow_the_recall(tmp_path):
    _write(tmp_path, "sources.json", _code(r5=0.72))
    results = dm.Results(tmp_path)
    assert dm.render("code-target", [], results) == "Target met: docstring R@5 0.720 (72 of 100) ≥ 0.70"
    assert dm.render("code-margin", [], results) == "72 of 100 clears 0.70 by three queries (69 would miss it)"
    assert dm.render("code-tokens", [], results) == "10 % more tokens (1,100 vs 1,000)"
    assert dm.render("code-budget", [], results) == ("gold is found as often or slightly more (0.750 vs 0.750 within "
                                                    "1,000 tokens); the answer reads five passages instead of 4.5 on average")
    assert dm.render("code-symbols", [], results) == "costs nothing on R@1 and gains 0.20 on identifier queries"
    assert dm.render("part-load", ["sources.json", "code", "2"], results) == "0.13"  # half up, as written
    assert dm.render("sources-load", ["sources.json"], results) == "0.13-1.50"
    table = dm.render("code-table", [], results).splitlines()
    assert table[0].endswith("| identifier queries at rank 1 (40) |")
    assert table[2] == "| defaults | 0.300 | **0.720** | 0.800 | 0.450 | 0.750 | 5.0, 1,100, 0.700 | **0.900** |"
    _write(tmp_path, "sources.json", _code(r5=0.68))
    results = dm.Results(tmp_path)
    assert dm.render("code-target", [], results) == "Target missed: docstring R@5 0.680 (68 of 100) < 0.70"
    assert dm.render("code-margin", [], results) == "68 of 100 misses 0.70 by 2 queries (70 would reach it)"


def _web(precision: float, found: float) -> dict:
    return {"commit": "abc1234", "web": {
        "pages_crawled": 10, "build_s": 9.6, "chunks_with_anchor_share": 0.95,
        "crawl_summary": "crawled 10 pages (10 new or changed; 10 downloaded) in 0.3s; skipped 0",
        "cleanliness": {"chunks": 1234, "with_markdown_escape": 2, "flattened_doctest": 0,
                        "starting_with_empty_bullet": 1, "titles_with_site_suffix": 0},
        "no_op_recrawl": {"lastmod": {"seconds": 0.125},
                          "conditional_requests": {"seconds": 0.2, "summary": "crawled 10 pages (10 not modified)"}},
        "retrieval_by_page": {"n": 10, "recall@1": 0.9},
        "api_questions": {"n": 20, "recall@1": 0.85, "recall@5": found, "anchor_precision_all": precision,
                          "anchor_precision_of_found": 0.947, "identifier_queries": 20, "identifier_rank1_rate": 0.95},
        "run": {"command": "python benchmarks/sources.py --parts web", "load_average_at_start": [1.44, 0, 0]}}}


def test_the_web_figures_and_the_anchor_target(tmp_path):
    _write(tmp_path, "sources-web.json", _web(precision=0.9, found=0.95))
    results = dm.Results(tmp_path)
    assert dm.render("web-anchor", [], results) == "0.900 of all 20 (0.947 of the 19 found; target 0.90)"
    assert dm.render("web-margin", [], results) == (
        "The web figures sit exactly on the anchor target (18 of 20): one more miss would fail it")
    assert dm.render("web-index", [], results) == (
        "10 pages, 1,234 chunks, 95.0 % of chunks anchored; 0 flattened doctests, 1 empty bullets, 0 titles with "
        "the site suffix, 2 chunks with a backslash before a markdown character")
    assert dm.render("web-crawl", [], results) == (
        "The first crawl of the 10 pages took 0.3 s and the index build 10 s; a no-op re-crawl took 0.13 s with "
        "sitemap lastmod (0 requests) and 0.20 s with conditional requests only (10 × 304)")
    _write(tmp_path, "sources-web.json", _web(precision=0.85, found=0.95))
    assert dm.render("web-margin", [], dm.Results(tmp_path)) == "The web figures miss the anchor target by 1 of 20 questions"


def _answers(missed: int) -> dict:
    corpus = {"planned": 10, "asked": 10, "gold_in_top5": 8, "gold_in_sources": 8 - missed, "gold_cited_by_answer": 2,
              "abstained": 4, "gold_in_top5_not_in_sources": missed}
    return {"answers": {"summary": {"code": corpus, "web": {**corpus, "asked": 9}}, "seconds": 1234.5,
                        "questions": [{"seconds": s} for s in (3.0, 8.55, 9.0, None)],
                        "run": {"commit": "0ddba11", "load_average_at_start": [1.25, 0, 0]}}}


def test_the_answer_figures(tmp_path):
    _write(tmp_path, "sources-answers.json", _answers(missed=0))
    results = dm.Results(tmp_path)
    assert dm.render("answers-run", [], results) == (
        "commit 0ddba11 (one hit per definition; load 1.3 at start, 1,234 s): 10 code and 9 web questions asked")
    assert dm.render("answers-sources", [], results) == (
        "Gold in the reply's sources whenever it is in the top 5: 8/8 code, 8/8 web")
    assert dm.render("answers-seconds", [], results) == "8.6"
    _write(tmp_path, "sources-answers.json", _answers(missed=1))
    assert dm.render("answers-sources", [], dm.Results(tmp_path)) == (
        "Gold in the reply's sources not always when it is in the top 5: 7/8 code, 7/8 web")


def test_bm25_figures_and_a_missing_file(tmp_path):
    split = {"plain": {"ndcg@10": 0.6804}, "identifiers": {"ndcg@10": 0.682}, "identifiers_compounds": {"ndcg@10": 0.6803}}
    worse = {**split, "identifiers_compounds": {"ndcg@10": 0.69}}
    _write(tmp_path, "bm25-identifiers.json", {"splits": {"test": split, "train": worse}})
    results = dm.Results(tmp_path)
    assert dm.render("bm25-identifiers", [], results) == "0.680 -> 0.682 (test), 0.680 -> 0.682 (train)"
    assert dm.render("compounds-cost", [], results) == "changed nDCG@10 0.002 test / 0.008 train"  # one split gained
    assert dm.render("code-table", [], results) == "(not shown: `sources.json` not run)"
