"""REPORT.md section for `benchmarks/sources.py` (sources*.json): code search, the website crawl and the
embedded model's answers. Each part of a file carries its own `run` header (command, commit, load average),
because `sources.py --parts X` merges one part into a file holding the others."""
from __future__ import annotations

from pathlib import Path

from report_sections import _f, _load, _readable, _table

_INTRO = ("Code: queries are the first docstring sentence of public stdlib functions, the code indexed with "
          "docstrings blanked; a hit is a chunk of the gold file overlapping the function. Website: the Python 3.11 "
          "documentation (Debian python3.11-doc) served on loopback and crawled; API questions are the first "
          "sentence of a definition's description, the gold its page and anchor. Answers: questions asked through "
          "the `fast` plan with the packaged 0.5B model; \"in sources\" counts every source the reply lists.")


def _run_line(part: str, run: dict, command, machine) -> str:
    load = (run.get("load_average_at_start") or [None])[0]
    return (f"*{part}*: {command(run)} at commit {str(run.get('commit') or '–')[:7]}; {machine(run)}; "
            f"encoder {run.get('encoder', '–')}; load average {_f(load, 2)} at start.")


_CODE_ROWS = (("symbols_on", "defaults"), ("symbols_off", "symbol table off"), ("collapse_off", "collapse off"))


def _code(code: dict) -> list[str]:
    rows = []
    for name, label in _CODE_ROWS:
        if not (c := code.get(name)):
            continue
        read = c.get("top5_after_stitching") or {}
        rows.append([label, c.get("n"), c.get("recall@1"), c.get("recall@5"), c.get("recall@10"), c.get("mrr"),
                     c.get("gold_within_1000_tokens"), read.get("passages_mean"), read.get("tokens_mean"),
                     c.get("identifier_queries"), c.get("identifier_rank1_rate")])
    lines = [f"Code search on {len(code.get('modules') or [])} stdlib modules ({code.get('chunks')} chunks, "
             f"{code.get('index', '–')}; long code chunks: {(code.get('long_chunks') or {}).get('long_code', '–')}), "
             f"{code.get('queries')} queries (target R@5 >= 0.70; identifier queries at rank 1 >= 0.90). "
             "\"Within 1,000 tokens\": gold in the ranking's first 1,000 tokens (an equal budget); \"stitched top 5\": "
             "the passages and tokens the `fast` answer reads (– where the run predates these columns):", ""]
    lines += _table(["configuration", "n", "R@1", "R@5", "R@10", "MRR", "within 1,000 tokens",
                     "stitched top 5: passages", "tokens", "identifier queries", "identifier rank 1"], rows)
    readme = code.get("readme_question") or {}
    if readme:
        lines += [f"README question \"{readme.get('question')}\": {readme.get('gold')} at rank {readme.get('rank')}. "
                  f"Split gold functions found in the top 5: {code.get('split_gold_found_in_top5')}, stitched whole: "
                  f"{code.get('split_gold_stitched_whole')}.", ""]
    return lines


def _web(web: dict) -> list[str]:
    if web.get("skipped"):
        return [f"Website: not run ({web['skipped']}).", ""]
    clean = web.get("cleanliness") or {}
    page, api = web.get("retrieval_by_page") or {}, web.get("api_questions") or {}
    recrawl = web.get("no_op_recrawl") or {}
    lines = [f"Website: {web.get('pages_crawled')} pages, {web.get('chunks_per_page')} chunks a page, "
             f"{_f(web.get('chunks_with_anchor_share'))} of chunks with an #anchor; of {clean.get('chunks')} chunks "
             f"{clean.get('with_markdown_escape')} keep a markdown escape, {clean.get('flattened_doctest')} a "
             f"flattened doctest, {clean.get('starting_with_empty_bullet')} start with an empty bullet; "
             f"{clean.get('titles_with_site_suffix')} of {clean.get('titles')} titles keep the site suffix. "
             f"No-op re-crawl: " + ", ".join(f"{k} {_f(v.get('seconds'), 2)} s" for k, v in recrawl.items()) + ".",
             ""]
    lines += _table(["questions", "n", "R@1", "R@5", "R@10", "MRR", "identifier rank 1", "cited anchor = definition's"],
                    [["page", page.get("n"), page.get("recall@1"), page.get("recall@5"), page.get("recall@10"),
                      page.get("mrr"), None, None],
                     ["API", api.get("n"), api.get("recall@1"), api.get("recall@5"), api.get("recall@10"),
                      api.get("mrr"), api.get("identifier_rank1_rate"), api.get("anchor_precision_all")]])
    return lines


def _answers(answers: dict) -> list[str]:
    summary = answers.get("summary") or {}
    keys = ("asked", "gold_in_top5", "gold_in_sources", "gold_cited_by_answer", "abstained",
            "gold_in_top5_not_in_sources")
    lines = [f"Answers ({answers.get('model', '–')}, plan {answers.get('plan', '–')}, {answers.get('seconds')} s"
             f"{', cut by its deadline' if answers.get('partial') else ''}):", ""]
    lines += _table(["corpus", "asked", "gold in top 5", "gold in the reply's sources", "cited by the answer",
                     "abstained", "in top 5, not in sources"],
                    [[corpus] + [s.get(k) for k in keys] for corpus, s in summary.items()])
    return lines


def sources_section(folder: Path, load, command, machine) -> list[str]:
    lines = ["## Sources: code search, a website crawl and answers (sources*.json)", "", _INTRO, ""]
    files = _load(folder, load, "sources*.json", lines)
    for path, data in _readable(files, lines):
        lines += [f"### `{path.name}`", ""]
        for part, render in (("code", _code), ("web", _web), ("answers", _answers)):
            block = data.get(part)
            if not block:
                continue
            lines += [_run_line(part, block.get("run") or data, command, machine), ""]
            lines += render(block)
    return lines
