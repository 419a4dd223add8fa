"""The figures of docs/full-plan.md besides those it shares with docs/quality.md (`docs_figures_quality`):
coverage per fold with judges, COS-Mix's `full-R`, what keeping the conformal set costs, GMM as a stage and
Bulgakov's Table 1, RSE on long documents. Each function returns the words between one marker pair."""
from __future__ import annotations

from docs_figures_quality import judge_name, rows, rules
from docs_markers import Results, compare, count, f3, figure, pct, slashed
from report_figure_rows import Data, short_commit

TYPES = ("simple", "broader", "double")


def _folds(row: Data) -> list[Data]:
    return [row["folds"][k] for k in sorted(row["folds"])]


@figure("folds")
def folds(results: Results, file: str, dataset: str) -> str:
    """Coverage of the final `full` context per calibration fold, per judge, with the rule each fold chose."""
    r = rows(results(file), dataset)
    event = "per_gold" if dataset == "hotpotqa" else "any_gold"
    full = [(judge, row) for (judge, plan), row in r.items() if plan == "full"]
    first = _folds(full[0][1])
    parts = [f"{judge_name(judge)} {slashed([f[event] for f in _folds(row)])} ("
             + "; ".join(", ".join(f"{k} {v}" for k, v in f["rules"].items()) for f in _folds(row)) + ")"
             for judge, row in full]
    kept = ", ".join(f"{judge_name(judge)} {slashed([f['members_kept'] for f in _folds(row)], 2)}" for judge, row in full)
    return (f"target 1 − α − 2 s.e. = {slashed([f['target'] for f in first])} at n = "
            f"{' / '.join(str(f['n']) for f in first)}; {'per-gold' if event == 'per_gold' else 'any-gold'} coverage "
            f"per fold: {', '.join(parts)}; share of questions whose every conformal member reached the answer: {kept}")


@figure("pool-recall")
def pool_recall(results: Results, file: str, dataset: str) -> str:
    """The calibration pool's recall (the most any judge can keep) over judges and folds."""
    rel = results(file)["sets"][dataset]["judge_reliability"]
    values = [fold["pool_recall"] for judge in rel.values() for fold in judge.values()]
    return f"{min(values):.2f}–{max(values):.2f}"


def _stage(row: Data, stage: str) -> float:
    return float(row["stage_gold_recall"][stage])


@figure("full-r")
def full_r(results: Results, file: str, dataset: str) -> str:
    """`full` against `full-R` (first stage over the corpus less S): final gold recall, and after the judge."""
    r = rows(results(file), dataset)
    judges = [j for (j, plan) in r if plan == "full" and (j, "full-R") in r]
    final = [(r[(j, "full")]["gold_recall"], r[(j, "full-R")]["gold_recall"]) for j in judges]
    judged = [(_stage(r[(j, "full")], "+judge"), _stage(r[(j, "full-R")], "+judge")) for j in judges]
    gap = max(abs(a - b) for a, b in final) * 100
    return (f"final gold recall `full` vs `full-R` ({r[(judges[0], 'full')]['n']} questions): "
            + ", ".join(f"{judge_name(j)} {f3(a)} vs {f3(b)}" for j, (a, b) in zip(judges, final, strict=True))
            + f" (at most {gap:.1f} points apart); after the judge, before the conformal step: "
            + ", ".join(f"{judge_name(j)} {f3(a)} vs {f3(b)}" for j, (a, b) in zip(judges, judged, strict=True)))


@figure("cost")
def cost(results: Results, dataset: str) -> str:
    """Per judge: the rule `full` chose and its context tokens beside `fast`'s (stage ablation files)."""
    parts = []
    for judge in ("oracle", "flip10", "flip25"):
        r = rows(results(f"pipeline-ablation-{dataset}-{judge}.json"), dataset)
        fast = next(row for (_j, plan), row in r.items() if plan == "fast")
        full = next(row for (_j, plan), row in r.items() if plan == "full")
        both = f", both gold {f3(full['both_gold_recall'])}" if full.get("both_gold_recall") is not None else ""
        parts.append(f"{judge}: {rules(full)}, {count(full['context_tokens'])} tokens "
                     f"({full['context_tokens'] / fast['context_tokens']:.2f}× `fast`){both}")
    return "; ".join(parts)


@figure("gmm-stage")
def gmm_stage(results: Results) -> str:
    """GMM after the conformal step, per judge: gold recall and tokens, and whether it ever raised recall."""
    r = rows(results("pipeline-gmm-stage.json"))
    parts, raised = [], []
    for judge in dict.fromkeys(j for j, _p in r):
        before, after = r[(judge, "+conformal")], r[(judge, "+gmm")]
        change = (after["context_tokens"] - before["context_tokens"]) / before["context_tokens"]
        parts.append(f"{judge_name(judge)} {f3(before['gold_recall'])} → {f3(after['gold_recall'])} "
                     f"(tokens {count(before['context_tokens'])} → {count(after['context_tokens'])}, {change * 100:+.1f} %)")
        if compare(after["gold_recall"], before["gold_recall"], "up", "down", "same") == "up":
            raised.append(judge_name(judge))
    return (f"gold recall +conformal → +gmm on {next(iter(r.values()))['n']} questions: {', '.join(parts)}; it raised "
            f"gold recall for {', '.join(raised) if raised else 'no judge'}")


def _gmm_row(data: Data, kind: str, alpha: float) -> Data:
    return next(x for x in data["gmm"]["types"][kind]["extractive"]["rows"]
                if x["alpha"] == alpha and x["method"] == "interaction" and x["min_outlier_freq"] == 4)


@figure("gmm-paper")
def gmm_paper(results: Results, file: str) -> str:
    """Table 1 at the paper's settings (α 0.5, interaction, freq 4) against the same-size top-k."""
    data = results(file)
    simple = _gmm_row(data, "simple", 0.5)
    emb = [_gmm_row(data, kind, 0.5)["Emb%"] for kind in TYPES]
    kept = [_gmm_row(data, kind, 0.5)["AR"] for kind in TYPES]
    return (f"the filter keeps {min(kept) * 100:.0f}–{pct(max(kept), 0)} of the {simple['NRD']} chunks and "
            f"{round(simple['gold_kept'] * simple['n'])} of the {simple['n']} simple questions' gold paragraphs "
            f"({round(simple['gold_in_topk'] * simple['n'])} for the same-size top-k), and Emb% is "
            + ", ".join(f"{e:+.2f} ({kind})" for e, kind in zip(emb, TYPES, strict=True))
            + f" ({simple['n_ratio']} of the {simple['n']} simple questions have a ratio); TF-IDF% is "
            f"{simple['TFIDF%']:+.1f} on simple questions")


@figure("gmm-best")
def gmm_best(results: Results, file: str) -> str:
    """Table 1 at the paper's best row: against the same-size top-k and against all chunks, and the types on
    which the baseline changes the sign."""
    data = results(file)
    best = data["gmm"]["paper"]["best_row"]
    at = [_gmm_row(data, kind, float(best["alpha"])) for kind in TYPES]
    flips = [kind for kind, x in zip(TYPES, at, strict=True) if (x["Emb%"] > 0) != (x["Emb%_vs_all"] > 0)]
    topk = " / ".join(format(x["Emb%"], "+.2f") for x in at)
    everything = " / ".join(format(x["Emb%_vs_all"], "+.2f") for x in at)
    return (f"At α {best['alpha']} (the paper's best row: Emb% {best['Emb%']:+.1f}, TF-IDF% {best['TFIDF%']:+.1f} "
            f"with TinyLlama, against the same-size top-k) Emb% is {topk} "
            f"(against all {at[0]['NRD']}: {everything}; the baseline changes "
            f"the sign on {', '.join(flips) + ' questions' if flips else 'no question type'})")


@figure("gmm-std")
def gmm_std(results: Results, file: str) -> str:
    """Table 1 with standardisation at the paper's settings, and whether that is a gain on every type."""
    data = results(file)
    at = [_gmm_row(data, kind, 0.5) for kind in TYPES]
    gain = all(x["Emb%"] > 0 for x in at)
    return (f"keeps {min(x['AR'] for x in at) * 100:.0f}–{pct(max(x['AR'] for x in at), 0)} of the chunks with Emb% "
            + " / ".join(format(x["Emb%"], "+.2f") for x in at)
            + (": a gain on every question type" if gain else ": no gain that holds across question types"))


@figure("ran-at")
def ran_at(results: Results, *files: str) -> str:
    """The commit each named file ran at."""
    return ", ".join(f"`{name}` at {short_commit(results(name))}" for name in files)


def _rse(data: Data, corpus: str, judge: str) -> tuple[Data, Data]:
    cells = data["corpora"][corpus]["rows"]
    return cells[f"{judge}|full"], cells[f"{judge}|full (no RSE)"]


def _judges(data: Data, corpus: str) -> list[str]:
    return [k.split("|")[0] for k in data["corpora"][corpus]["rows"] if k.endswith("|full")]


@figure("rse-corpora")
def rse_corpora(results: Results, file: str) -> str:
    """What each long-document corpus is: documents, chunks per document, usable questions, calibration."""
    data = results(file)
    return "; ".join(f"{name}: {c['documents']} documents, {c['chunks']:,} chunks ({c['chunks_per_document']['min']}–"
                     f"{c['chunks_per_document']['max']} per document, median {c['chunks_per_document']['median']}), "
                     f"{c['questions_usable']:,} usable questions, {c['calibration']['n']} calibrating "
                     f"(`{c['calibration']['kind']}`), {next(iter(c['rows'].values()))['n']} evaluated per cell"
                     for name, c in data["corpora"].items())


@figure("rse-paper")
def rse_paper(results: Results, file: str) -> str:
    """The published figure the file records beside its own (not comparable: a whole system)."""
    paper = results(file)["paper"]
    return (f"{paper['system']} reports {paper['measure']} {paper['dsRAG']:g} % against {paper['vanilla_rag']:g} % "
            f"for vanilla RAG ({paper['source']})")


@figure("rse-table")
def rse_table(results: Results, file: str) -> str:
    """`full` with and without RSE per corpus and judge: answered share / context tokens (a block)."""
    data = results(file)
    lines = ["| corpus | judge | with RSE | without RSE |", "|---|---|---|---|"]
    for corpus in data["corpora"]:
        for judge in _judges(data, corpus):
            on, off = _rse(data, corpus, judge)
            lines.append(f"| {corpus} | {judge_name(judge)} | {f3(on['answered'])} / {count(on['tokens'])} | "
                         f"{f3(off['answered'])} / {count(off['tokens'])} |")
    return "\n".join(lines)


@figure("rse-summary")
def rse_summary(results: Results, file: str) -> str:
    """How often RSE formed segments, their length, the members kept, the tokens it adds and the answers it
    changes (in questions)."""
    data = results(file)
    cells = [(corpus, judge, *_rse(data, corpus, judge)) for corpus in data["corpora"] for judge in _judges(data, corpus)]
    applied = ", ".join(f"{pct(_rse(data, c, _judges(data, c)[0])[0]['rse_applied'], 0)} ({c})" for c in data["corpora"])
    seg = [on["segment_chunks"] for *_x, on, _off in cells if on.get("segment_chunks")]
    kept = min(on["members_kept"] for *_x, on, _off in cells)
    more = [(on["tokens"] / off["tokens"] - 1) * 100 for *_x, on, off in cells]
    changed = [(judge_name(j), c, round((on["answered"] - off["answered"]) * on["n"])) for c, j, on, off in cells]
    answers = ", ".join(f"{d:+d} of {on['n']} ({c}, {j})" for (j, c, d), (*_x, on, _o) in zip(changed, cells, strict=True) if d)
    return (f"RSE formed segments on {applied} of the questions, {min(seg):.1f}–{max(seg):.1f} chunks each; the share "
            f"of questions whose every conformal member reached the answer was at least {f3(kept)} with it. It adds "
            f"{min(more):.0f}–{max(more):.0f} % tokens and changes the answered questions by "
            + (answers if answers else "none"))


@figure("rse-whole")
def rse_whole(results: Results, file: str) -> str:
    """RSE where the answer spans chunks: answered with and without, in questions, and the tokens it adds."""
    data = results(file)
    corpus = next(iter(data["corpora"]))
    parts = []
    for judge in _judges(data, corpus):
        on, off = _rse(data, corpus, judge)
        diff = round((on["answered"] - off["answered"]) * on["n"])
        parts.append(f"answered {f3(on['answered'])} with RSE vs {f3(off['answered'])} without ({judge_name(judge)}, "
                     f"{diff:+d} of {on['n']} questions) for {(on['tokens'] / off['tokens'] - 1) * 100:+.0f} % tokens "
                     f"({count(on['tokens'])} vs {count(off['tokens'])})")
    return "; ".join(parts)
