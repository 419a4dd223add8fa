"""The first screen of REPORT.md: the headline figures of the `full` plan's promises, each with its file,
commit and command. Only result files that record the commit they ran at are used here."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from report_plan import predating

# Published SciFact (BEIR test split) nDCG@10 baselines.
PUBLISHED = [
    ("BM25, Elasticsearch multifield", 0.665, "BEIR paper (Thakur et al. 2021, Table 2)"),
    ("BM25, Pyserini flat index", 0.679, "Pyserini BEIR regressions"),
]


def _f(value: Any, digits: int = 3) -> str:
    return "–" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def _source(path: Path, data: dict, command) -> str:
    recorded = str(data.get("commit") or "not recorded")
    commit = recorded[:12] + ("+dirty" if "dirty" in recorded else "")
    load = data.get("load_average") or data.get("load_average_at_start") or [None]
    encoders = sorted({str(s["encoder"]) for s in (data.get("sets") or {}).values()
                       if isinstance(s, dict) and s.get("encoder")} |
                      ({str(data["index"]["encoder"])} if (data.get("index") or {}).get("encoder") else set()))
    index = f", index encoder {', '.join(encoders)}" if encoders else ""
    return f"`{path.name}` at {commit}, load {_f(load[0], 1)}{index}: {command(data)}"


def _one(folder: Path, load, name: str):
    found = [(p, d) for p, d, _ in load(folder, name) if d is not None and d.get("commit")]
    return found[0] if found else (None, None)


def _two_se(p: float | None, n: int | None) -> float | None:
    return None if p is None or not n else 2 * math.sqrt(max(p * (1 - p), 1e-12) / n)


def abstention_lines(folder: Path, load, command) -> list[str]:
    found = [(p, d) for p, d, _ in load(folder, "pipeline-abstention*.json") if d is not None and d.get("commit")]
    if not found:
        return ["- Abstention on SQuAD 2.0: not run with the current code (`pipeline-abstention*.json`).", ""]
    lines = ["**Calibrated abstention, SQuAD 2.0** (answer step honours the model's abstention unless the "
             "calibrated answerability score says answerable, and a judge trusted for the question that finds nothing "
             "relevant is an abstention on the same terms; target: `full` abstains on unanswerable ≥ `fast` and on "
             "answerable ≤ `fast` + 2 points, every judge). Judges are the scripted oracle and noisy oracles; the "
             "reader is the gullible one (`pipeline_data.GullibleChat`): it answers an unanswerable question with "
             "its plausible (wrong) answer whenever that text is in its context, and abstains only when neither a "
             "gold nor a plausible answer is there, so a plan that fills its context with near-miss text loses.", "",
             "| judge | reader | plan | n | abstains, unanswerable | abstains, answerable | precision | recall | "
             "gold recall | context tokens |", "|---|---|---|---|---|---|---|---|---|---|"]
    for _path, data in found:
        reader = data.get("reader") or "oracle"
        for key, r in ((data.get("sets") or {}).get("squad2", {}).get("rows", {})).items():
            judge, plan = key.split("|")
            lines.append(f"| {judge} | {reader} | {plan} | {r.get('n')} | {_f(r.get('abstain_unanswerable'))} | "
                         f"{_f(r.get('abstain_answerable'))} | {_f(r.get('abstain_precision'))} | "
                         f"{_f(r.get('abstain_recall'))} | {_f(r.get('gold_recall'))} | {_f(r.get('context_tokens'), 0)} |")
    lines.append("")
    return lines + [f"Source: {_source(path, data, command)}" for path, data in found] + [""]


SETS = ("squad2", "hotpotqa", "scifact")  # the three shared sets every promise is measured on
EVENT = {"squad2": "coverage", "hotpotqa": "per_gold", "scifact": "coverage"}
PASSING = {"hotpotqa": "passing_per_gold"}  # the same event on the conformal passing set, before the context budget


def _sizes(size: dict | None) -> str:
    """Mean | p50 / p90 / max of a size distribution (– when the file predates it)."""
    if not size:
        return "– | –"
    return f"{_f(size.get('mean'), 1)} | {_f(size.get('p50'), 0)} / {_f(size.get('p90'), 0)} / {_f(size.get('max'))}"


def coverage_lines(folder: Path, load, command) -> list[str]:
    found = [(p, d) for p, d, _ in load(folder, "pipeline-coverage-default*.json") if d is not None and d.get("commit")]
    if not found:
        return ["- Final-context coverage in the default `full` configuration: not run with the current code.", ""]
    path, data = found[0]
    sets = {name: info for _, d in found for name, info in (d.get("sets") or {}).items()}
    missing = [s for s in SETS if s not in sets]
    lines = ["**Coverage in the default configuration** (threshold retrieval over the whole index, "
             "`conformal.candidates = \"corpus\"`, no judge: the context is the conformal set joined to the `fast` "
             "context; context budget `loop.context_tokens` "
             f"{_f(((data.get('defaults') or {}).get('loop') or {}).get('context_tokens'))} "
             "(– : unset, the model window less the reply and the prompt, 14,848 tokens at the defaults); "
             "target ≥ 1 − α − 2 s.e.; event: any gold for SQuAD/SciFact, each gold paragraph for HotpotQA):", "",
             "| set | α | n | coverage | 1 − α − 2 s.e. | context size mean | p50 / p90 / max | conformal set alone "
             "| its size mean | p50 / p90 / max | questions the budget cut |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    failed: list[str] = []
    for name, info in sets.items():
        for key, v in ((info or {}).get("coverage") or {}).items():
            if not key.endswith("|calibrated"):
                continue
            alpha = float(key.split("|")[0].split("=")[1])
            cov, n = v.get(EVENT.get(name, "coverage")), v.get("n")
            pairs = n * 2 if name == "hotpotqa" and n else n
            bound = None if cov is None else 1 - alpha - (_two_se(1 - alpha, pairs) or 0)
            size = v.get("set_size") or {}
            if cov is not None and bound is not None and cov < bound:
                failed.append(f"{name} at α {alpha}")
            lines.append(f"| {name} | {alpha} | {pairs} | {_f(cov)} | {_f(bound)} | {_f(v.get('mean_context'), 1)} | "
                         f"{_f(size.get('p50'), 0)} / {_f(size.get('p90'), 0)} / {_f(size.get('max'))} | "
                         f"{_f(v.get(PASSING.get(name, 'passing_coverage')))} | {_sizes(v.get('passing_size'))} | "
                         f"{_f(v.get('budget_cut'))} |")
    lines += ["", "Target " + (f"**not met**: {', '.join(failed)} (compare the conformal set alone, before the budget)."
                               if failed else "met in every row.")]
    rows = (sets.get("hotpotqa") or {}).get("rows") or {}
    fast, full = rows.get("oracle|fast"), rows.get("oracle|full")
    if fast and full and fast.get("context_tokens"):
        lines += ["", f"Oracle HotpotQA `full`: both-gold {_f(full.get('both_gold_recall'))} at "
                      f"{_f(full['context_tokens'] / fast['context_tokens'], 2)}× `fast`'s context tokens "
                      f"(fast both-gold {_f(fast.get('both_gold_recall'))}; target ≥ 0.95 at ≤ 0.6×)."]
    if missing:
        lines += ["", f"Not re-measured with the current defaults: {', '.join(missing)} (did not fit in the session)."]
    for name, info in sets.items():
        for fold, ab in ((info or {}).get("abstention_calibration") or {}).items():
            if ab:
                lines += ["", f"Abstention calibration on {name} (fold {fold}, {ab['origin']}): cutoff {ab['threshold']} "
                              f"at a false-answer rate ≤ {ab['max_false_answer']}; held-out: unanswerable overruled "
                              f"{_f(ab['false_answerable'])} (n {ab['n_unanswerable']}), answerable detected "
                              f"{_f(ab['answerable_detected'])} (n {ab['n_answerable']})."]
    lines.append("")
    return lines + [f"Source: {_source(p, d, command)}" for p, d in found] + [""]


def stage_steps(found: list) -> list[tuple[dict, float | None, float | None, float | None, bool]]:
    """Each ablation row with its gold recall's s.e., its change in gold recall and context tokens against the
    stage before it (same set and judge), and whether that change is a loss of more than one s.e."""
    out = []
    for _path, data in found:
        before: dict = {}
        for r in data.get("rows") or []:
            g, n = r.get("gold_recall"), r.get("n")
            se = None if g is None or not n else math.sqrt(max(g * (1 - g), 1e-12) / n)
            prev = before.get((r.get("dataset"), r.get("judge")))
            d_rec = None if prev is None or g is None or prev.get("gold_recall") is None else g - prev["gold_recall"]
            d_tok = None if prev is None else (r.get("context_tokens") or 0) - (prev.get("context_tokens") or 0)
            prev_se = None if prev is None else prev.get("_se")
            miss = d_rec is not None and prev_se is not None and d_rec < -max(prev_se, se or 0)
            out.append((r, se, d_rec, d_tok, miss))
            before[(r.get("dataset"), r.get("judge"))] = {**r, "_se": se}
    return out


def ablation_lines(folder: Path, load, command) -> list[str]:
    found = [(p, d) for p, d, _ in load(folder, "pipeline-ablation*.json") if d is not None and d.get("commit")]
    if not found:
        return ["- Stage ablation: not run with the current code (`pipeline-ablation*.json`).", ""]
    lines = ["**Stage by stage, default `full` settings** (GMM off; each plan adds one stage to the one above it; "
             "target: no stage lowers gold recall below the one before by more than one standard error; Δ: gold "
             "recall and context tokens against the stage before, on the same questions):", "",
             "| set | judge | plan | n | gold recall | ± 1 s.e. | Δ recall | Δ tokens | both gold | context tokens | "
             "rule |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    misses = []
    for r, se, d_rec, d_tok, miss in stage_steps(found):
        if miss:
            misses.append(f"{r.get('dataset')} {r.get('judge')} {r.get('plan')} ({d_rec:+.3f})")
        rule = ", ".join(f"{k} {v}" for k, v in (r.get("rule") or {}).items() if k != "-") or "-"
        lines.append(f"| {r.get('dataset')} | {r.get('judge')} | {r.get('plan')} | {r.get('n')} | "
                     f"{_f(r.get('gold_recall'))} | {_f(se)} | {'–' if d_rec is None else f'{d_rec:+.3f}'} | "
                     f"{'–' if d_tok is None else f'{d_tok:+.0f}'} | {_f(r.get('both_gold_recall'))} | "
                     f"{_f(r.get('context_tokens'), 0)} | {rule} |")
    lines += ["", ("Stages that lower gold recall by more than one s.e.: " + "; ".join(misses)) if misses
              else "No stage lowers gold recall by more than one s.e. in these runs.", ""]
    return lines + [f"Source: {_source(path, data, command)}" for path, data in found] + [""]


def embedded_lines(folder: Path, load, command) -> list[str]:
    files = load(folder, "pipeline-embedded*.json")
    found = [(p, d) for p, d, _ in files if d is not None and d.get("commit")]
    older = [f"`{p.name}` {e}" for p, e in predating(files)]
    if not found:
        return ["- The embedded 0.5B model as judge and reader: not run with the current code "
                "(`pipeline-embedded*.json` holds earlier code's samples).", ""]
    lines = ["**Embedded Qwen2.5-Coder 0.5B** (judge, reader and validator; a sample: `n` is what the run reached "
             "in its time budget):", "", "| set | plan | n | gold recall | both gold | context tokens | abstains, "
             "unanswerable | abstains, answerable | s / question |", "|---|---|---|---|---|---|---|---|---|"]
    for _path, data in found:
        for r in data.get("rows") or []:
            lines.append(f"| {r.get('dataset')} | {r.get('plan')} | {r.get('n')} | {_f(r.get('gold_recall'))} | "
                         f"{_f(r.get('both_gold_recall'))} | {_f(r.get('context_tokens'), 0)} | "
                         f"{_f(r.get('abstain_unanswerable'))} | {_f(r.get('abstain_answerable'))} | "
                         f"{_f(r.get('seconds'), 0)} |")
    lines += ["", *(f"Not shown: {o}." for o in older), ""] if older else [""]
    return lines + [f"Source: {_source(path, data, command)}" for path, data in found] + [""]


def fallback_lines(folder: Path, load, command) -> list[str]:
    path, data = _one(folder, load, "fallback.json")
    if data is None:
        return ["- Sparse fallback: not run with the current code (`fallback.json`).", ""]
    lines = ["**Sparse fallback** (questions whose gold chunk is in the sparse subset S; no judge; FlashRank has no "
             "model offline, so the reranker's embedding fallback orders the candidates by cosine; the distance score "
             "is ours. `step`: the gold chunk among what the step adds offline, outside the fast context):", "",
             "| set | sparse-gold questions | gold recall fast → +fallback | answer in context fast → +fallback | "
             "R@2 ours / cosine / BM25 / step | MRR ours / cosine / BM25 |", "|---|---|---|---|---|---|"]
    for name, part in (data.get("sets") or {}).items():
        s = part.get("summary") or {}
        r2 = " / ".join(_f((s.get(k) or {}).get("recall@2")) for k in ("ours", "cosine", "bm25", "step"))
        mrr = " / ".join(_f((s.get(k) or {}).get("mrr")) for k in ("ours", "cosine", "bm25"))
        lines.append(f"| {name} | {s.get('sparse_gold_questions')} of {s.get('questions')} | "
                     f"{_f(s.get('gold_recall_fast'))} → {_f(s.get('gold_recall_with_fallback'))} | "
                     f"{_f(s.get('answer_fast'))} → {_f(s.get('answer_with_fallback'))} | {r2} | {mrr} |")
    return lines + ["", f"Source: {_source(path, data, command)}", ""]


def gmm_lines(folder: Path, load, command) -> list[str]:
    from ragsieve.agent.config import OutlierConfig

    shipped = OutlierConfig().standardize
    lines = []
    for name, on in (("filters-gmm.json", False), ("filters-gmm-std.json", True)):
        path, data = _one(folder, load, name)
        if data is None:
            continue
        label = f"eq. 9 standardisation {'on' if on else 'off'}{' (the shipped default)' if on == shipped else ''}"
        best = []
        for kind, readers in ((data.get("gmm") or {}).get("types") or {}).items():
            for reader, result in (readers or {}).items():
                rows = result.get("rows") or []
                default = next((r for r in rows if r["alpha"] == 0.5 and r["method"] == "interaction"
                                and r["min_outlier_freq"] == 4), None)
                best_row = ((data.get("gmm") or {}).get("paper") or {}).get("best_row") or {}
                at_best = next((r for r in rows if r["alpha"] == best_row.get("alpha") and r["method"] ==
                                best_row.get("method") and r["min_outlier_freq"] == 4), None)
                if at_best and "Emb%_vs_all" in at_best:  # the paper's number beside ours, by the paper's measure
                    best.append(f"{kind}/{reader} at the paper's best row ({best_row['method']}, α {best_row['alpha']}, "
                                f"freq 4): Emb% {_f(at_best['Emb%'], 2)}, TFIDF% {_f(at_best['TFIDF%'], 2)} vs the "
                                f"paper's Emb% +{best_row.get('Emb%')}, TFIDF% +{best_row.get('TFIDF%')}")
                if default and "Emb%_vs_all" in default:  # issue 46: Emb% against the paper's same-size top-k
                    best.append(f"{kind}/{reader} n {default['n']}: Emb% {_f(default['Emb%'], 2)}, TFIDF% "
                                f"{_f(default['TFIDF%'], 2)} vs the same-size top-k (the paper's measure; vs all "
                                f"{default['NRD']}: Emb% {_f(default['Emb%_vs_all'], 2)}), gold kept "
                                f"{_f(default.get('gold_kept'))} (top-k same size {_f(default.get('gold_in_topk'))}), "
                                f"AR {_f(default['AR'])}")
                elif default:
                    best.append(f"{kind}/{reader} n {default['n']}: Emb% {_f(default['Emb%'], 2)} vs all "
                                f"{default['NRD']} (not the paper's baseline; vs the same-size top-k "
                                f"{_f(default.get('Emb%_vs_topk'), 2)}), TFIDF% {_f(default['TFIDF%'], 2)}, gold kept "
                                f"{_f(default.get('gold_kept'))} (top-k same size {_f(default.get('gold_in_topk'))}), "
                                f"AR {_f(default['AR'])}")
        writer = ((data.get("gmm") or {}).get("generation") or {}).get("model")
        who = (f"broader/double questions and references written here by {writer}, the paper's by GPT-4o; "
               if writer else "") + "reader: our extractive stand-in, the paper's TinyLlama-1.1B"
        lines += [f"- GMM Table 1 ({label}; paper settings α 0.5, interaction, freq 4; eq. 15, the mean of "
                  f"per-question ratios; {who}): " + "; ".join(best)
                  + f". Source: {_source(path, data, command)}"]
    return (["**GMM outliers** (off by default in `full`):", ""] + lines + [""]) if lines else []


def retrieval_lines(folder: Path, load, command) -> list[str]:
    """SciFact first-stage retrieval beside the published BM25 baselines (benchmarks/retrieval.py)."""
    path, data = _one(folder, load, "retrieval_scifact.json")
    if data is None:
        return ["- SciFact retrieval: not run with the current code (`retrieval_scifact.json`).", ""]
    m = data.get("methods") or {}
    figures = ", ".join(f"{name} {_f((m.get(key) or {}).get('ndcg@10'))}" for name, key in
                        (("hybrid weighted (default)", "hybrid_weighted"), ("RRF", "hybrid_rrf"), ("BM25", "bm25s"),
                         ("dense", "dense")))
    return [f"**Retrieval beside published baselines** (SciFact BEIR test, {data.get('queries')} queries, nDCG@10, "
            f"a document at its best chunk): {figures}; published: "
            + "; ".join(f"{name} {score} ({source})" for name, score, source in PUBLISHED) + ".", "",
            f"Source: {_source(path, data, command)}", ""]


def headline_section(folder: Path, load, command) -> list[str]:
    from report_stages import in_run_lines  # they import this module's helpers
    from report_targets import targets_section

    lines = ["## Headline figures (current code)", "",
             "Each block names its result file, the commit it ran at and its command; "
             "a result file that records no commit is never used here.", ""]
    lines += targets_section(folder, load)
    for part in (retrieval_lines, abstention_lines, coverage_lines, ablation_lines, in_run_lines, embedded_lines,
                 fallback_lines, gmm_lines):
        lines += part(folder, load, command)
    return lines
