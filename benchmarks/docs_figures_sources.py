"""The figures of docs/sources.md: the code part (`sources.json`: docstring and identifier queries on CPython
modules, with symbols and collapse switched off), the website part (`sources-web.json`: the Python docs
crawled and indexed), answers with the embedded model (`sources-answers.json`) and SciFact BM25 with
identifier and compound terms (`bm25-identifiers.json`). Each function returns the words between one marker
pair (`docs_markers`) and says whether a target is met from the numbers."""
from __future__ import annotations

import math
import re
from statistics import median

from docs_figures_scaling import load_range
from docs_markers import Results, figure, fixed
from report_figure_rows import Data, short_commit

CODE_TARGET_R5 = 0.70  # docstring R@5 of the code part (`targets` in sources.json)
ANCHOR_TARGET = 0.90  # anchor precision over all API questions of the web part
WORDS = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
ROWS = (("defaults", "symbols_on"), ("symbols off", "symbols_off"), ("collapse off", "collapse_off"))


def _code(results: Results) -> Data:
    return results("sources.json")["code"]


def _web(results: Results) -> Data:
    return results("sources-web.json")["web"]


def _count(value: float) -> str:
    """A mean count: a word when it is whole ('five'), else the number ('4.53')."""
    return WORDS.get(int(value), f"{value:g}") if float(value).is_integer() else f"{value:g}"


def _hits(rate: float, n: int) -> int:
    return round(rate * n)


def _needed(target: float, n: int) -> int:
    """The fewest of `n` that reach a `target` share (rounded first, so 0.9 x 80 is 72, not 73)."""
    return math.ceil(round(target * n, 6))


@figure("part-load")
def part_load(results: Results, file: str, part: str, digits: str) -> str:
    """The load average at the start of one part's run (its `run` record), to `digits` decimals."""
    return fixed(results(file)[part]["run"]["load_average_at_start"][0], int(digits))


@figure("sources-load")
def sources_load(results: Results, *files: str) -> str:
    """The range of the load averages the runs record, at the page's precision (two decimals)."""
    return load_range(results, files, 2)


@figure("compounds-cost")
def compounds_cost(results: Results) -> str:
    """SciFact BM25 alone: splitting compounds in every text against identifiers alone, per split."""
    splits = results("bm25-identifiers.json")["splits"]
    diffs = {name: s["identifiers"]["ndcg@10"] - s["identifiers_compounds"]["ndcg@10"] for name, s in splits.items()}
    word = "cost" if all(d > 0 for d in diffs.values()) else "changed"
    return f"{word} nDCG@10 " + " / ".join(f"{fixed(abs(d), 3)} {name}" for name, d in diffs.items())


@figure("bm25-identifiers")
def bm25_identifiers(results: Results) -> str:
    """SciFact BM25 alone, plain terms -> identifier terms, per split."""
    splits = results("bm25-identifiers.json")["splits"]
    return ", ".join(f"{fixed(s['plain']['ndcg@10'], 3)} -> {fixed(s['identifiers']['ndcg@10'], 3)} ({name})"
                     for name, s in splits.items())


@figure("long-chunks")
def long_chunks(results: Results) -> str:
    code = _code(results)
    long = code["long_chunks"]
    return (f"{long['over_window']:,} of the benchmark's {code['chunks']:,} code chunks ({fixed(long['share'] * 100, 0)} %) "
            f"are longer than MiniLM's {long['window_wordpieces']}-wordpiece window")


@figure("code-set")
def code_set(results: Results) -> str:
    code = _code(results)
    return f"{len(code['modules'])} stdlib modules, {code['queries']:,} docstring"


@figure("code-build")
def code_build(results: Results) -> str:
    """The code part's fresh build time, commit and encoder."""
    code = _code(results)
    return f"{fixed(code['build_s'], 1)} s; commit {short_commit(code['run'])}, the encoder a new index gets (`{code['run']['encoder']}`)"


@figure("code-chunks")
def code_chunks(results: Results) -> str:
    return f"{_code(results)['chunks']:,}"


@figure("code-table")
def code_table(results: Results) -> str:
    """Docstring queries by setting: recall, MRR, gold within 1,000 tokens, the stitched top 5, identifier
    queries at rank 1; the defaults' R@5 and identifier rate in bold."""
    code = _code(results)
    n_ident = code["symbols_on"]["identifier_queries"]
    lines = ["| | R@1 | R@5 | R@10 | MRR | within 1,000 tokens | stitched top 5: passages, tokens, gold | "
             f"identifier queries at rank 1 ({n_ident}) |", "|---|---|---|---|---|---|---|---|"]
    for label, key in ROWS:
        r = code[key]
        bold = (lambda s: f"**{s}**") if key == "symbols_on" else (lambda s: s)
        top5 = r["top5_after_stitching"]
        lines.append(f"| {label} | {fixed(r['recall@1'], 3)} | {bold(fixed(r['recall@5'], 3))} | "
                     f"{fixed(r['recall@10'], 3)} | {fixed(r['mrr'], 3)} | {fixed(r['gold_within_1000_tokens'], 3)} | "
                     f"{top5['passages_mean']}, {top5['tokens_mean']:,}, {fixed(top5['gold_share'], 3)} | "
                     f"{bold(fixed(r['identifier_rank1_rate'], 3))} |")
    return "\n".join(lines)


@figure("code-target")
def code_target(results: Results) -> str:
    """Whether docstring R@5 reaches the target, and the collapse-off row beside it."""
    code = _code(results)
    n, on = code["queries"], code["symbols_on"]["recall@5"]
    met = round(on, 3) >= CODE_TARGET_R5
    return (f"Target {'met' if met else 'missed'}: docstring R@5 {fixed(on, 3)} ({_hits(on, n)} of {n}) "
            f"{'≥' if met else '<'} {CODE_TARGET_R5:.2f}")


@figure("code-collapse-off")
def code_collapse_off(results: Results) -> str:
    code = _code(results)
    return f"{fixed(code['collapse_off']['recall@5'], 3)} ({_hits(code['collapse_off']['recall@5'], code['queries'])})"


@figure("code-budget")
def code_budget(results: Results) -> str:
    """Defaults against collapse off at an equal token budget, and what the stitched top 5 reads."""
    code = _code(results)
    on, off = code["symbols_on"], code["collapse_off"]
    a, b = on["gold_within_1000_tokens"], off["gold_within_1000_tokens"]
    word = ("as often or slightly more" if round(a, 3) >= round(b, 3) else "less often")
    t_on, t_off = on["top5_after_stitching"], off["top5_after_stitching"]
    return (f"gold is found {word} ({fixed(a, 3)} vs {fixed(b, 3)} within 1,000 tokens); the answer reads "
            f"{_count(t_on['passages_mean'])} passages instead of {_count(t_off['passages_mean'])} on average")


@figure("code-tokens")
def code_tokens(results: Results) -> str:
    code = _code(results)
    a, b = code["symbols_on"]["top5_after_stitching"]["tokens_mean"], code["collapse_off"]["top5_after_stitching"]["tokens_mean"]
    return f"{fixed(abs(a / b - 1) * 100, 0)} % {'more' if a >= b else 'fewer'} tokens ({a:,} vs {b:,})"


@figure("code-margin")
def code_margin(results: Results) -> str:
    """How many queries the defaults' R@5 clears the target by, and the count that would miss it."""
    code = _code(results)
    n, hits = code["queries"], _hits(code["symbols_on"]["recall@5"], code["queries"])
    needed = _needed(CODE_TARGET_R5, n)
    if hits < needed:
        return f"{hits} of {n} misses {CODE_TARGET_R5:.2f} by {needed - hits} queries ({needed} would reach it)"
    margin = hits - needed + 1
    return (f"{hits} of {n} clears {CODE_TARGET_R5:.2f} by {WORDS.get(margin, str(margin))} "
            f"quer{'y' if margin == 1 else 'ies'} ({needed - 1} would miss it)")


@figure("code-symbols")
def code_symbols(results: Results) -> str:
    """What the symbol table costs or gains: R@1 on descriptions, rank 1 on identifier queries."""
    code = _code(results)
    on, off = code["symbols_on"], code["symbols_off"]
    r1 = round(on["recall@1"] - off["recall@1"], 2)
    ident = on["identifier_rank1_rate"] - off["identifier_rank1_rate"]
    r1_words = "costs nothing on R@1" if r1 >= 0 else f"costs {fixed(-r1, 2)} R@1"
    return f"{r1_words} and {'gains' if ident >= 0 else 'loses'} {fixed(abs(ident), 2)} on identifier queries"


@figure("code-split")
def code_split(results: Results) -> str:
    code = _code(results)
    return (f"{fixed(code['gold_split_share'] * 100, 1)} % of gold functions are split over several chunks; of the "
            f"{code['split_gold_found_in_top5']} whose piece is in the top 5, {code['split_gold_stitched_whole']} are")


@figure("readme-rank")
def readme_rank(results: Results) -> str:
    return f"rank {_code(results)['readme_question']['rank']}"


def _crawl_seconds(summary: str) -> str:
    found = re.search(r" in ([0-9.]+)s;", summary)
    if found is None:
        raise ValueError(f"no crawl time in {summary!r}")
    return found.group(1)


@figure("web-run")
def web_run(results: Results) -> str:
    run = _web(results)["run"]
    return f"`{run['command']}`"


@figure("web-index")
def web_index(results: Results) -> str:
    """Pages, chunks, anchors and the cleanliness counts of the crawled site."""
    web = _web(results)
    clean = web["cleanliness"]
    anchored = "every chunk anchored" if web["chunks_with_anchor_share"] == 1 else \
        f"{fixed(web['chunks_with_anchor_share'] * 100, 1)} % of chunks anchored"
    return (f"{web['pages_crawled']} pages, {clean['chunks']:,} chunks, {anchored}; {clean['flattened_doctest']} "
            f"flattened doctests, {clean['starting_with_empty_bullet']} empty bullets, {clean['titles_with_site_suffix']} "
            f"titles with the site suffix, {clean['with_markdown_escape']} chunks with a backslash before a markdown character")


@figure("web-recall")
def web_recall(results: Results) -> str:
    """Page recall on written questions and API questions, identifier queries at rank 1."""
    web = _web(results)
    pages, api = web["retrieval_by_page"], web["api_questions"]
    return (f"{pages['n']} written questions: page R@1 {fixed(pages['recall@1'], 3)}. {api['n']} API questions (a definition's first sentence): "
            f"page R@1 {fixed(api['recall@1'], 3)}, R@5 {fixed(api['recall@5'], 3)}; identifier queries (the "
            f"definition's name) find the definition at rank 1 for {_hits(api['identifier_rank1_rate'], api['identifier_queries'])}"
            f"/{api['identifier_queries']}")


@figure("web-anchor")
def web_anchor(results: Results) -> str:
    api = _web(results)["api_questions"]
    found = _hits(api["recall@5"], api["n"])
    return (f"{fixed(api['anchor_precision_all'], 3)} of all {api['n']} ({fixed(api['anchor_precision_of_found'], 3)} "
            f"of the {found} found; target {ANCHOR_TARGET:.2f})")


@figure("web-crawl")
def web_crawl(results: Results) -> str:
    """The first crawl and build, and the two no-op re-crawls."""
    web = _web(results)
    noop = web["no_op_recrawl"]
    cond = re.search(r"(\d+) not modified", noop["conditional_requests"]["summary"])
    return (f"The first crawl of the {web['pages_crawled']} pages took {_crawl_seconds(web['crawl_summary'])} s and the "
            f"index build {fixed(web['build_s'], 0)} s; a no-op re-crawl took {fixed(noop['lastmod']['seconds'], 2)} s "
            f"with sitemap lastmod (0 requests) and {fixed(noop['conditional_requests']['seconds'], 2)} s with "
            f"conditional requests only ({cond.group(1) if cond else '?'} × 304)")


@figure("web-margin")
def web_margin(results: Results) -> str:
    """How far the anchor precision sits from its target, in questions."""
    api = _web(results)["api_questions"]
    n, hits = api["n"], _hits(api["anchor_precision_all"], api["n"])
    needed = _needed(ANCHOR_TARGET, n)
    if hits < needed:
        return f"The web figures miss the anchor target by {needed - hits} of {n} questions"
    if hits == needed:
        return f"The web figures sit exactly on the anchor target ({hits} of {n}): one more miss would fail it"
    return f"The web figures clear the anchor target by {hits - needed} of {n} questions"


@figure("answers-run")
def answers_run(results: Results) -> str:
    """The answers run: commit, load at start, its length, how many questions were asked."""
    ans = results("sources-answers.json")["answers"]
    code, web = ans["summary"]["code"], ans["summary"]["web"]
    asked = ("all " if code["asked"] == code["planned"] and web["asked"] == web["planned"] else "") + \
        f"{code['asked']} code and {web['asked']} web questions asked"
    return (f"commit {short_commit(ans['run'])} (one hit per definition; load "
            f"{fixed(ans['run']['load_average_at_start'][0], 1)} at start, {ans['seconds']:,.0f} s): {asked}")


@figure("answers")
def answers(results: Results) -> str:
    """Per corpus: gold in the top 5, in the reply's sources, cited by the answer; abstentions."""
    ans = results("sources-answers.json")["answers"]
    code, web = ans["summary"]["code"], ans["summary"]["web"]
    parts = []
    for name, s, top in (("Code", code, "retrieved top 5"), ("Web", web, "top 5")):
        n = s["asked"]
        parts.append(f"{name}: gold in the {top} {s['gold_in_top5']}/{n}, in the reply's sources "
                     f"{s['gold_in_sources']}/{n}, cited by the answer itself {s['gold_cited_by_answer']}/{n}; "
                     f"{s['abstained']} abstained")
    return parts[0] + " (the 0.5B model on blanked code), each still listing the closest passages. " + parts[1]


@figure("answers-sources")
def answers_sources(results: Results) -> str:
    ans = results("sources-answers.json")["answers"]["summary"]
    always = all(s["gold_in_top5_not_in_sources"] == 0 for s in ans.values())
    counts = ", ".join(f"{s['gold_in_top5'] - s['gold_in_top5_not_in_sources']}/{s['gold_in_top5']} {name}"
                       for name, s in ans.items())
    return f"Gold in the reply's sources {'whenever' if always else 'not always when'} it is in the top 5: {counts}"


@figure("answers-seconds")
def answers_seconds(results: Results) -> str:
    questions = results("sources-answers.json")["answers"]["questions"]
    return fixed(median(q["seconds"] for q in questions if q.get("seconds") is not None), 1)
