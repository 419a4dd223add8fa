"""The figures of docs/quality.md (and the same measurements quoted in docs/full-plan.md): coverage, abstention,
stage by stage, the embedded model, the sparse fallback. Each function reads named result files through
`Results` and returns the words between one marker pair (`docs_markers`); it says the comparison too (above,
below, as often) so that the prose around it stays true whatever the files hold."""
from __future__ import annotations

from docs_markers import Results, chain, compare, count, f3, figure, pct, slashed
from report_figure_rows import COVERAGE_FILES, Data, short_commit
from report_headline import stage_steps
from report_stages import in_run_steps

EVENT = {"hotpotqa": "per_gold"}  # each gold paragraph on HotpotQA; any gold passage on SQuAD and SciFact
PASSING = {"hotpotqa": "passing_per_gold"}
ALPHAS = ("0.05", "0.1", "0.2")
ABLATION = [f"pipeline-ablation-{s}-{j}.json" for s in ("hotpotqa", "squad2", "scifact")
            for j in ("oracle", "flip10", "flip25")]


def rows(data: Data, dataset: str | None = None) -> dict[tuple[str, str], Data]:
    """{(judge, plan): row} of a pipeline result, for one set when given."""
    return {(r["judge"], r["plan"]): r for r in data["rows"] if dataset is None or r["dataset"] == dataset}


def judge_name(judge: str) -> str:
    """oracle-flip10 -> 'flip10' (the docs' short names)."""
    return judge.replace("oracle-", "")


def rules(row: Data) -> str:
    """The context rules a row's questions got, with their counts ('auto: union on 100')."""
    return ", ".join(f"{k} on {v}" for k, v in (row.get("rule") or {}).items() if k != "-") or "no rule"


def _bound(alpha: float, n: int) -> float:
    return 1 - alpha - 2 * ((1 - alpha) * alpha / n) ** 0.5


def _coverage(results: Results, dataset: str, file: str | None = None) -> tuple[Data, dict[str, Data]]:
    data = results(file or COVERAGE_FILES[dataset])
    info = data["sets"][dataset]
    return info, {a: info["coverage"][f"alpha={a}|calibrated"] for a in ALPHAS}


@figure("hotpot-full")
def hotpot_full(results: Results) -> str:
    """Both gold paragraphs in the default `full` context with the oracle judge, beside `fast`."""
    r = rows(results("pipeline-coverage-default.json"), "hotpotqa")
    fast, full = r[("oracle", "fast")], r[("oracle", "full")]
    return (f"{pct(full['both_gold_recall'])} of {full['n']} questions at {count(full['context_tokens'])} context "
            f"tokens, {full['context_tokens'] / fast['context_tokens']:.2f}× `fast`'s {count(fast['context_tokens'])} "
            f"(`fast`: {pct(fast['both_gold_recall'])})")


@figure("alone")
def alone(results: Results, dataset: str) -> str:
    """The conformal set alone (threshold retrieval, held-out questions) at each α: coverage, bound, sizes."""
    info, cov = _coverage(results, dataset)
    pairs = [c["n"] * (2 if dataset == "hotpotqa" else 1) for c in cov.values()]
    bounds = [_bound(float(a), n) for a, n in zip(ALPHAS, pairs, strict=True)]
    chosen = ", ".join(f"`{kind}` on fold {fold}" for fold, kind in sorted(info["calibrated_kinds"].items()))
    sizes = [c["passing_size"] for c in cov.values()]
    return (f"{slashed([c[PASSING.get(dataset, 'passing_coverage')] for c in cov.values()])} for α = "
            f"{' / '.join(ALPHAS)} ({pairs[0]} {'pairs' if dataset == 'hotpotqa' else 'questions'}; 1 − α − 2 s.e. = "
            f"{slashed(bounds)}; the score chosen: {chosen}), sets of "
            f"{' / '.join(_span(s) for s in sizes)} chunks (median {' / '.join(format(s['p50'], 'g') for s in sizes)}, "
            f"mean {slashed([s['mean'] for s in sizes], 1)})")


def _span(size: Data) -> str:
    return f"{size['min']}–{size['max']}"


@figure("joined")
def joined(results: Results, dataset: str) -> str:
    """The answer's context with no trusted judge: the conformal set joined to the fast context, at each α."""
    _info, cov = _coverage(results, dataset)
    cut = [f"α {a}: {pct(c['budget_cut'], 0)}" for a, c in cov.items() if c.get("budget_cut")]
    return (f"{slashed([c[EVENT.get(dataset, 'coverage')] for c in cov.values()])} (mean "
            f"{slashed([c['mean_context'] for c in cov.values()], 1)} chunks"
            + (f"; contexts the budget cut, {', '.join(cut)}" if cut else "") + ")")


@figure("budget")
def budget(results: Results, file: str, dataset: str, alpha: str) -> str:
    """One α of one coverage run: the passing set's size, the share the budget cut, coverage against its bound."""
    _info, cov = _coverage(results, dataset, file)
    c = cov[alpha]
    s = c["passing_size"]
    return (f"the passing set was {s['min']}–{s['max']} chunks (median {s['p50']:g}); the budget cut it for "
            f"{pct(c['budget_cut'], 0)} of the {c['n']} questions, and coverage was "
            f"{f3(c[EVENT.get(dataset, 'coverage')])} against 1 − α − 2 s.e. = {f3(_bound(float(alpha), c['n']))}")


@figure("kinds")
def kinds(results: Results, file: str, dataset: str) -> str:
    """The calibrated score each fold chose."""
    info, _cov = _coverage(results, dataset, file)
    return ", ".join(f"`{kind}` on fold {fold}" for fold, kind in sorted(info["calibrated_kinds"].items()))


@figure("commit")
def commit(results: Results, file: str) -> str:
    return short_commit(results(file))


@figure("abstention-calibration")
def abstention_calibration(results: Results) -> str:
    """The labelled abstention calibration's held-out rates on SQuAD 2.0."""
    info = results(COVERAGE_FILES["squad2"])["sets"]["squad2"]["abstention_calibration"]
    ab = info[sorted(info)[0]]
    return (f"at a {pct(ab['max_false_answer'], 0)} false-answer rate, {pct(ab['false_answerable'])} of "
            f"{ab['n_unanswerable']:,} unanswerable questions were overruled and {pct(ab['answerable_detected'])} of "
            f"{ab['n_answerable']:,} answerable ones detected")


def _flipped(judge: str) -> str:
    return "with the oracle judge" if judge == "oracle" else f"with {judge.split('flip')[-1]} % of verdicts flipped"


@figure("abstention")
def abstention(results: Results) -> str:
    """`fast` and `full` per judge on SQuAD 2.0 with the gullible reader, and the target (`full` abstains on
    unanswerable questions at least as often as `fast`) met or missed by how many questions."""
    r = {tuple(k.split("|")): v for k, v in results("pipeline-abstention.json")["sets"]["squad2"]["rows"].items()}
    judges = [j for j, plan in r if plan == "full" and (j, "fast") in r]
    answerable = r[(judges[0], "full")]["stage_n"]
    unanswerable = r[(judges[0], "full")]["n"] - answerable
    fast = r[(judges[0], "fast")]
    parts = [f"On {answerable} answerable and {unanswerable} unanswerable questions `fast` abstains on "
             f"{pct(fast['abstain_unanswerable'])} of unanswerable and {pct(fast['abstain_answerable'])} of answerable "
             "ones; `full`"]
    for judge in judges:
        full, fast = r[(judge, "full")], r[(judge, "fast")]
        miss = round((fast["abstain_unanswerable"] - full["abstain_unanswerable"]) * unanswerable)
        verdict = ("at least as often as `fast` on unanswerable ones (the target)" if miss <= 0 else
                   f"below `fast`'s on unanswerable ones: the target, at least as often as `fast`, missed by {miss} "
                   f"of {unanswerable} questions")
        parts.append(f" {_flipped(judge)} on {pct(full['abstain_unanswerable'])} and "
                     f"{pct(full['abstain_answerable'])}, {verdict};")
    return "".join(parts).rstrip(";")


@figure("chain")
def stage_chain(results: Results, dataset: str, judge: str) -> str:
    """Gold recall plan by plan (fast → +judge → +conformal → +rse → full) and the context tokens it costs."""
    data = results(f"pipeline-ablation-{dataset}-{judge}.json")
    plan_rows = [r for r in data["rows"] if r["dataset"] == dataset]
    first, last = plan_rows[0], plan_rows[-1]
    return (f"{chain([r['gold_recall'] for r in plan_rows])} ({last['n']} questions; context tokens "
            f"{count(first['context_tokens'])} → {count(last['context_tokens'])}, "
            f"{last['context_tokens'] / first['context_tokens']:.2f}× `{first['plan']}`'s; {rules(last)})")


@figure("stage-verdict")
def stage_verdict(results: Results) -> str:
    """Whether any stage of the ablation lowers gold recall by more than one s.e., and the largest drop."""
    found = [(name, results(name)) for name in ABLATION]
    steps = [(r, se, d, miss) for r, se, d, _t, miss in stage_steps(found) if d is not None]
    misses = [f"{r['dataset']} {judge_name(r['judge'])} {r['plan']} ({d:+.3f})" for r, _se, d, miss in steps if miss]
    r, se, d, _m = min(steps, key=lambda s: s[2])
    worst = (f"the largest drop, {r['dataset']} {judge_name(r['judge'])} {r['plan']} {d:+.3f}, against one s.e. of "
             f"{f3(se)}" if d < 0 else "none lowers it at all")
    return (("stages lowering gold recall by more than one standard error: " + "; ".join(misses)) if misses
            else "no stage lowers gold recall by more than one standard error") + f" ({len(steps)} stages; {worst})"


@figure("stagecheck")
def stagecheck(results: Results, file: str) -> str:
    """How often a prefix plan run on its own ends where the same stage inside `full` does."""
    sets = results(file)["sets"]
    return "; ".join((f"{name}: " if len(sets) > 1 else "") + ", ".join(
        f"{a['equal']} of {a['questions']} questions at {stage}" for stage, a in info["stage_agreement"].items())
        for name, info in sets.items())


@figure("embedded-stages")
def embedded_stages(results: Results, dataset: str) -> str:
    """The embedded judge's stages read from one `full` run's trace, and whether a stage lost gold."""
    file = f"pipeline-embedded-{dataset}.json"
    data = results(file)
    steps = [s for s in in_run_steps([(file, data)]) if s[0]["dataset"] == dataset]
    chain_text = " → ".join(f"{stage} {f3(g, 2)}" for _r, stage, g, *_ in steps)
    lost = [f"{stage} ({d:+.2f})" for _r, stage, _g, _se, d, miss in steps if miss]
    full = rows(data, dataset)[("embedded-0.5b", "full")]
    return (f"gold recall {chain_text} ({full['stage_n']} answerable questions); "
            + (f"stages losing more than one s.e.: {', '.join(lost)}" if lost else
               "no stage loses more than one s.e. of gold recall"))


def _abstained(row: Data, key: str, n: int) -> str:
    return f"{round(row[key] * n)} of {n}"


@figure("embedded")
def embedded(results: Results, dataset: str) -> str:
    """The embedded 0.5B model's `full` against `fast`: time, calls, context, rule, recall and abstention."""
    r = rows(results(f"pipeline-embedded-{dataset}.json"), dataset)
    fast, full = r[("embedded-0.5b", "fast")], r[("embedded-0.5b", "full")]
    answerable = full.get("stage_n") or full["n"]
    text = (f"`full` took {full['seconds']:.0f} s a question against `fast`'s {fast['seconds']:.0f} s "
            f"({full['llm_calls']:.1f} LLM calls against {fast['llm_calls']:.0f}), with {count(full['context_tokens'])} "
            f"context tokens against {count(fast['context_tokens'])} ({full['context_tokens'] / fast['context_tokens']:.2f}×; "
            f"rule {rules(full)} of {full['n']}); gold recall {f3(full['gold_recall'], 2)} against "
            f"{f3(fast['gold_recall'], 2)}")
    if full.get("both_gold_recall") is not None:
        text += f", both gold {f3(full['both_gold_recall'], 2)} against {f3(fast['both_gold_recall'], 2)}"
    if full.get("abstain_unanswerable") is not None:
        unanswerable = full["n"] - answerable
        word = compare(full["abstain_unanswerable"], fast["abstain_unanswerable"], "more often than", "less often than",
                       "as often as")
        text += (f"; it abstained on {_abstained(full, 'abstain_unanswerable', unanswerable)} unanswerable questions "
                 f"against {round(fast['abstain_unanswerable'] * unanswerable)} with `fast`'s context ({word} `fast`; "
                 "the target is at least as often)")
    if full.get("abstain_answerable") is not None:
        text += (f"; {'on' if full.get('abstain_unanswerable') is not None else 'it abstained on'} "
                 f"{_abstained(full, 'abstain_answerable', answerable)} answerable questions against "
                 f"{round(fast['abstain_answerable'] * answerable)}")
    return text


def moved(before: float, after: float, what: str) -> str:
    word = compare(after, before, "raised", "lowered", "left")
    return f"{word} {what} from {f3(before)} to {f3(after)}" if word != "left" else f"left {what} at {f3(before)}"


@figure("fallback")
def fallback(results: Results) -> str:
    """The sparse fallback on questions whose gold chunk is in S: our score against cosine and BM25, the fast
    context's gold recall, and what adding the fallback's chunks changed."""
    sets = results("fallback.json")["sets"]
    ranks, fast, added = [], [], []
    for name, part in sets.items():
        s = part["summary"]
        ours, cos, bm25 = (s[k]["recall@2"] for k in ("ours", "cosine", "bm25"))
        word = compare(ours, cos, "more often than", "less often than", "as often as")
        ranks.append(f"{name} {f3(ours)} vs {f3(cos)}, {word} plain cosine; BM25 {f3(bm25)}")
        fast.append(f"{pct(s['gold_recall_fast'])} ({name}, {s['sparse_gold_questions']} questions)")
        added.append(f"on {name} it {moved(s['gold_recall_fast'], s['gold_recall_with_fallback'], 'gold recall')} "
                     f"and {moved(s['answer_fast'], s['answer_with_fallback'], 'answer-in-context')}")
    return (f"in the top 2 of S our distance score ranks the gold chunk: {'; '.join(ranks)}. The `fast` context "
            f"already holds a gold document for {' / '.join(fast)} of these questions; adding the fallback's chunks: "
            + "; ".join(added))


@figure("fallback-answers")
def fallback_answers(results: Results, dataset: str) -> str:
    s = results("fallback.json")["sets"][dataset]["summary"]
    return f"{dataset} answer-in-context {f3(s['answer_fast'])} without them, {f3(s['answer_with_fallback'])} with them"


@figure("squad-set-size")
def squad_set_size(results: Results, alpha: str) -> str:
    """The conformal set's size on SQuAD at one α (median, largest)."""
    _info, cov = _coverage(results, "squad2")
    s = cov[alpha]["passing_size"]
    return f"a median of {s['p50']:g} chunks (at most {s['max']})"
