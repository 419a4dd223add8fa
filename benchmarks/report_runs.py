"""Report sections for the evaluation runs: SciFact beside the published baselines, the loop benchmark
(agentic*.json), combination rules replayed (combine-replay*.json), conformal coverage (filters*.json), other
`ragsieve eval` runs (eval*.json) and reliability (reliability*.json).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from report_files import command, command_at, fmt, generic_file, is_scifact, load, machine, table
from report_headline import PUBLISHED


def scifact_section(folder: Path) -> list[str]:
    lines = ["## SciFact (BEIR test) nDCG@10 beside the published baselines", ""]
    rows: list[list[Any]] = [[name, score, "–", "–", source, "published"] for name, score, source in PUBLISHED]
    retrieval, evals = load(folder, "retrieval*.json"), load(folder, "eval*.json")
    for path, data, error in retrieval:
        if data is None:
            rows.append([f"{path.name}: unreadable ({error})", None, None, None, "", ""])
            continue
        for method, fig in (data.get("methods") or {}).items():
            if isinstance(fig, dict) and is_scifact(data):
                rows.append([f"ours: {method} ({path.name})", fig.get("ndcg@10"), fig.get("recall@100"),
                             fig.get("latency_ms_p50"), command_at(data),
                             machine(data)])
    for path, data, error in evals:  # noqa: B007
        if data is None or not is_scifact(data):
            continue
        for plan, s in (data.get("plans") or {}).items():
            r = s.get("retrieval", {})
            ms = s.get("cost", {}).get("wall_p50_s")
            rows.append([f"ours: hybrid first stage via `ragsieve eval`, {plan} ({path.name}; latency end to end, "
                         "with query embedding)", r.get("fs_ndcg@10"),
                         r.get("fs_recall@100"), ms * 1000 if ms is not None else None,
                         command_at(data),
                         machine(data)])
    lines += table(["system", "nDCG@10", "Recall@100", "latency p50 (ms)", "command / source", "machine"], rows)
    if not retrieval and not any(d is not None and is_scifact(d) for _, d, _ in evals):
        lines += ["Our SciFact numbers: not run (no benchmarks/results/retrieval*.json or SciFact eval*.json).", ""]
    lines += ["Document-level metrics: a document ranks at its best chunk (BEIR max-pooling); "
              "tokenisation, stemming and chunking change BM25 numbers, so compare like with like.", ""]
    return lines


def agentic_section(folder: Path) -> list[str]:
    """Per file and set: one row per plan (summary dicts), then the set's scalar figures."""
    lines = ["## Loop benchmark: fast vs agentic (agentic*.json)", ""]
    files = load(folder, "agentic*.json")
    if not files:
        return lines + ["not run (no benchmarks/results/agentic*.json).", ""]
    lines += ["`both_gold@5` reads the context's first five chunks. With a trusted judge the `agentic` context (rule "
              "`union`, `agent/steps/expand.py`) is the relevant set together with `fast`'s context, best retrieval "
              "evidence first, so its first five chunks are `fast`'s and its gain shows in `gold_recall` (gold "
              "paragraphs in the whole context). In an oracle run no answer is generated (EM/F1 0).", ""]
    for path, data, error in files:
        if data is None or not isinstance(data.get("sets"), dict):
            lines += generic_file(path, data, error or "no `sets`")
            continue
        for name, part in data["sets"].items():
            summary = part.get("summary", {}) if isinstance(part, dict) else {}
            plans = {k: v for k, v in summary.items() if isinstance(v, dict) and k != "agentic_vs_fast"}
            keys = sorted({k for v in plans.values() for k, x in v.items() if not isinstance(x, (list, dict))})
            lines += [f"### {name} ({path.name})", ""]
            if data.get("note"):
                lines += [f"Note: {data['note']}", ""]
            lines += table(["plan"] + keys + ["command", "machine"],
                           [[plan] + [v.get(k) for k in keys] + [command(data), machine(data)] for plan, v in plans.items()])
            scalars = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
            if scalars:
                lines += ["- " + ", ".join(f"{k} {fmt(v)}" for k, v in scalars.items())]
            versus = summary.get("agentic_vs_fast")
            if isinstance(versus, dict):
                lines += ["- agentic vs fast: " + ", ".join(f"{k} {fmt(v)}" for k, v in versus.items())]
            lines.append("")
    return lines


def combine_section(folder: Path) -> list[str]:
    """Combination rules scored on recorded verdicts (combine-replay.json)."""
    lines = ["## Combination rules on recorded verdicts (combine-replay.json)", ""]
    files = load(folder, "combine-replay*.json")
    if not files:
        return lines + ["not run (no benchmarks/results/combine-replay*.json).", ""]
    for path, data, error in files:
        if data is None or not isinstance(data.get("files"), dict):
            lines += generic_file(path, data, error or "no `files`")
            continue
        lines += [f"Command: `{data.get('command', '?')}`", ""]
        for name, part in data["files"].items():
            lines += [f"### {name} ({part.get('llm')}; {part.get('questions')} questions, "
                      f"fast both-gold@5 {fmt(part.get('fast_both_gold@5'))})", ""]
            lines += table(["anchor_k", "admit_depth", "both-gold@5", "worse than fast", "better than fast"],
                           [[r["anchor_k"], r["admit_depth"], r["both_gold@5"], r["worse"], r["better"]]
                            for r in part.get("rules", {}).values()])
    return lines


EVAL_COLUMNS = [("retrieval", "fs_ndcg@10", "first-stage nDCG@10"), ("retrieval", "fs_recall@100", "R@100"),
                ("retrieval", "fs_mrr", "MRR"), ("retrieval", "ctx_ndcg@10", "context nDCG@10"),
                ("retrieval", "gold_fraction", "gold recall"), ("answers", "em", "EM"), ("answers", "f1", "F1"),
                ("answers", "abstain_correct", "abstention"), ("answers", "judge_correct", "judge"),
                ("cost", "calls", "LLM calls/q"), ("cost", "wall_p50_s", "wall p50 (s)")]


def eval_section(folder: Path) -> list[str]:
    """`ragsieve eval` results (other than SciFact): one row per dataset and plan."""
    lines = ["## Other `ragsieve eval` runs (eval*.json)", ""]
    files = [(p, d, e) for p, d, e in load(folder, "eval*.json") if d is None or not is_scifact(d)]
    if not files:
        return lines + ["not run (no benchmarks/results/eval*.json besides the SciFact ones above).", ""]
    rows = []
    for path, data, error in files:
        if data is None or not isinstance(data.get("plans"), dict):
            rows.append([f"{path.name}: unreadable ({error or 'no plans'})"] + [None] * (len(EVAL_COLUMNS) + 1) + ["", ""])
            continue
        ds = data.get("dataset", {})
        for plan, s in data["plans"].items():
            judged = s.get("retrieval", {}).get("n_fs_ndcg@10")
            asked = f"{s.get('questions')}" + (f" ({judged} judged)" if judged != s.get("questions") else "")
            rows.append([f"{Path(ds.get('folder', '?')).name} / {plan} ({path.name})", asked]
                        + [s.get(part, {}).get(key) for part, key, _ in EVAL_COLUMNS] + [command_at(data), machine(data)])
    return lines + table(["dataset / plan", "questions"] + [label for _, _, label in EVAL_COLUMNS]
                         + ["command", "machine"], rows)


CONFORMAL_KINDS = ("raw", "gap", "ratio", "rank", "hybrid-rank", "hybrid-ratio")


def conformal_section(folder: Path) -> list[str]:
    """Coverage against 1-alpha and mean set size per nonconformity score, one row per alpha."""
    lines = ["## Conformal coverage and set size (filters*.json)", ""]
    rows = []
    for _path, data, _ in load(folder, "filters*.json"):
        alphas = ((data or {}).get("conformal") or {}).get("alphas") or {}
        for alpha, a in alphas.items():
            kinds = a.get("kinds", {})
            cells = [f"{fmt(kinds[k]['coverage_mean'])} / {fmt(kinds[k]['mean_kept'])}" if k in kinds else None
                     for k in CONFORMAL_KINDS]
            top_k = a.get("fixed_top_k_at_equal_coverage") or []
            rows.append([alpha, fmt(a.get("target")), f"±{fmt(a.get('tolerance'))}"] + cells
                        + [fmt(sum(top_k) / len(top_k)) if top_k else None, fmt(a.get("smallest_vs_raw")),
                           f"{a.get('n_calibration')}/{a.get('n_heldout')}", command(data), machine(data)])
    if not rows:
        return lines + ["not run (no conformal results in benchmarks/results/filters*.json).", ""]
    header = ["α", "1−α", "tolerance"] + [f"{k}: coverage / kept" for k in CONFORMAL_KINDS] + [
        "fixed top-k at equal coverage", "smallest / raw", "calib/held-out", "command", "machine"]
    return lines + table(header, rows)


def _control(control: dict[str, Any] | None) -> str:
    if not control:
        return "not run"
    return f"{control.get('failures')} failures in {control.get('build_trials')} builds + {control.get('read_trials')} opens"


def reliability_section(folder: Path) -> list[str]:
    """Issue 10: hostile cases tried/passed and concurrent build/read trials/failures (reliability*.json)."""
    lines = ["## Reliability: hostile cases and concurrent builds (reliability*.json)", ""]
    files = load(folder, "reliability*.json")
    if not files:
        return lines + ["not run (no benchmarks/results/reliability*.json).", ""]
    rows = []
    for path, data, error in files:
        if data is None:
            rows.append([f"{path.name}: unreadable ({error})"] + [None] * 8)
            continue
        cases = data.get("cases") or {}
        inproc, cli = data.get("concurrent_inprocess") or {}, data.get("concurrent_cli") or {}
        rows.append([path.name, f"{cases.get('passed', '–')} / {cases.get('tried', '–')}",
                     f"{inproc.get('build_trials')} builds + {inproc.get('read_trials')} opens",
                     f"{cli.get('trials')} processes", data.get("concurrency_trials"),
                     data.get("concurrency_failures"), _control(data.get("control_without_lock")),
                     command(data), machine(data)])
    return lines + table(["file", "cases passed / tried", "in-process trials", "CLI trials", "concurrency trials",
                          "failures", "control: same trials without the lock", "command", "machine"], rows) + [
        "Target: 0 failures in >= 100 concurrent build/read trials.", ""]
