"""Aggregates and the `report.md` text of an evaluation run (`ragsieve.eval.evaluate`); files: `outputs`."""

from __future__ import annotations

import json
import time
from itertools import combinations
from pathlib import Path
from typing import Any

from ragsieve.eval.provenance import machine_info, source_commit, versions
from ragsieve.tools.metrics import mean, p50_p95

RETRIEVAL_KEYS = [
    "fs_ndcg@10",
    "fs_recall@10",
    "fs_recall@100",
    "fs_mrr",
    "ctx_ndcg@10",
    "ctx_recall",
    "ctx_mrr",
    "gold_all",
    "gold_fraction",
]
ANSWER_KEYS = ["em", "f1", "false_abstain", "abstain_correct", "squad2_em", "squad2_f1", "judge_correct"]
COST_KEYS = ["calls", "cached_calls", "prompt_tokens", "completion_tokens", "context_tokens", "n_context"]
LABELS = {
    "fs_ndcg@10": "first-stage nDCG@10",
    "fs_recall@10": "first-stage R@10",
    "fs_recall@100": "first-stage R@100",
    "fs_mrr": "first-stage MRR",
    "ctx_ndcg@10": "context nDCG@10",
    "ctx_recall": "context recall",
    "ctx_mrr": "context MRR",
    "gold_all": "all gold in context",
    "gold_fraction": "gold-passage recall",
    "em": "EM",
    "f1": "F1",
    "false_abstain": "false abstention",
    "abstain_correct": "abstention (unanswerable)",
    "squad2_em": "SQuAD2 EM",
    "squad2_f1": "SQuAD2 F1",
    "judge_correct": "judge accuracy",
    "calls": "LLM calls/q",
    "cached_calls": "cached calls/q",
    "prompt_tokens": "prompt tok/q",
    "completion_tokens": "completion tok/q",
    "context_tokens": "context tok/q",
    "n_context": "passages/q",
    "wall_p50_s": "wall p50 (s)",
    "wall_p95_s": "wall p95 (s)",
}


def _means(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[key] = mean(values)
            out[f"n_{key}"] = len(values)
    return out


def summarize(rows: list[dict[str, Any]], plans: list[str]) -> dict[str, dict[str, Any]]:
    """Per plan: means of every retrieval/answer metric (with how many questions had it) and cost."""
    summary: dict[str, dict[str, Any]] = {}
    for plan in plans:
        mine = [r for r in rows if r["plan"] == plan]
        walls = [r["wall_s"] for r in mine if r.get("wall_s") is not None]
        p50, p95 = p50_p95(walls)
        cost = _means(mine, COST_KEYS)
        cost.update(
            {
                "wall_p50_s": p50,
                "wall_p95_s": p95,
                "wall_mean_s": mean(walls),
                "total_calls": sum(r.get("calls", 0) for r in mine),
                "total_prompt_tokens": sum(r.get("prompt_tokens", 0) for r in mine),
                "total_completion_tokens": sum(r.get("completion_tokens", 0) for r in mine),
                "judge_calls": sum(r.get("judge_calls", 0) for r in mine),
                "judge_tokens": sum(r.get("judge_tokens", 0) for r in mine),
            }
        )
        summary[plan] = {
            "questions": len(mine),
            "errors": sum(1 for r in mine if r.get("error")),
            "retrieval": _means(mine, RETRIEVAL_KEYS),
            "answers": _means(mine, ANSWER_KEYS),
            "cost": cost,
        }
    return summary


def assemble_results(
    *,
    command: str,
    started: float,
    dataset: dict[str, Any],
    settings: dict[str, Any],
    manifest: dict[str, Any],
    config: dict[str, Any],
    rows: list[dict[str, Any]],
    plans: list[str],
) -> dict[str, Any]:
    """The results.json document: every figure, the config, versions, machine and dataset fingerprint."""
    return {
        "command": command,
        "commit": source_commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "elapsed_s": round(time.time() - started, 3),
        "machine": machine_info(),
        "versions": versions(),
        "dataset": dataset,
        "settings": {**settings, "context_tokens_by": "ragsieve.tools.ingest.chunking.count_tokens"},
        "index": {
            k: manifest.get(k)
            for k in ("generation", "embedding", "chunk_tokens", "bm25", "faiss", "counts", "corpus_fingerprint", "created")
        },
        "config": config,
        "plans": summarize(rows, plans),
        "per_question": "per_question.jsonl",
    }


def json_differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for k in sorted(set(old) | set(new), key=str)
            for d in json_differences(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        ]
    return [] if old == new else [f"{path or 'value'}: was {json.dumps(old)[:60]}, now {json.dumps(new)[:60]}"]


def primary_metric(summary: dict[str, dict[str, Any]]) -> str:
    """The headline quality figure available in every plan: F1, else context nDCG@10, else first-stage nDCG@10."""
    for key, part in (("f1", "answers"), ("squad2_f1", "answers"), ("ctx_ndcg@10", "retrieval"), ("fs_ndcg@10", "retrieval")):
        if summary and all(s[part].get(key) is not None for s in summary.values()):
            return key
    return "fs_ndcg@10"


def running_postfix(rows: list[dict[str, Any]], plans: list[str]) -> str:
    """Running averages for the progress bar: the headline metric and LLM calls per plan."""
    parts = []
    for plan in plans:
        mine = [r for r in rows if r["plan"] == plan]
        for key in ("f1", "squad2_f1", "ctx_ndcg@10", "fs_ndcg@10"):
            value = mean(r.get(key) for r in mine)
            if value is not None:
                calls = mean(r.get("calls") for r in mine)
                parts.append(f"{plan} {LABELS[key].split()[-1]} {value:.3f}" + (f" {calls:.1f}c" if calls is not None else ""))
                break
    return " | ".join(parts)


def _fmt(value: Any, key: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if key.endswith("tokens") else f"{value:.3f}"
    return str(value)


def _table(summary: dict[str, dict[str, Any]], part: str, keys: list[str]) -> list[str]:
    keys = [k for k in keys if any(s[part].get(k) is not None for s in summary.values())]
    if not keys:
        return []
    lines = ["| plan | " + " | ".join(LABELS.get(k, k) for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for plan, s in summary.items():
        counts = [s[part].get(f"n_{k}") for k in keys]  # shown where the question count changes
        cells = [
            _fmt(s[part].get(k), k) + (f" (n={n})" if n is not None and (i == 0 or n != counts[i - 1]) else "")
            for i, (k, n) in enumerate(zip(keys, counts))
        ]
        lines.append(f"| {plan} | " + " | ".join(cells) + " |")
    return lines + [""]


def _wins(rows: list[dict[str, Any]], plans: list[str], key: str) -> list[str]:
    by = {(r["plan"], r["qid"]): r for r in rows}
    qids = list(dict.fromkeys(r["qid"] for r in rows))
    lines = [
        f"Per-question {LABELS[key]}: wins / losses / ties (rows in `per_question.jsonl`).",
        "",
        "| plan A | plan B | A better | B better | tie | largest gaps (qid: A−B) |",
        "|---|---|---|---|---|---|",
    ]
    for a, b in combinations(plans, 2):
        pairs = [(q, by[(a, q)].get(key), by[(b, q)].get(key)) for q in qids if (a, q) in by and (b, q) in by]
        diffs = [(q, x - y) for q, x, y in pairs if x is not None and y is not None]
        gaps = sorted(diffs, key=lambda d: -abs(d[1]))[:5]
        lines.append(
            f"| {a} | {b} | {sum(d > 0 for _, d in diffs)} | {sum(d < 0 for _, d in diffs)} | "
            f"{sum(d == 0 for _, d in diffs)} | " + ", ".join(f"{q}: {d:+.2f}" for q, d in gaps if d) + " |"
        )
    return lines + [""]


def render_report(results: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    summary, ds, machine = results["plans"], results["dataset"], results["machine"]
    lines = [
        f"# Evaluation: {Path(ds['folder']).name} ({ds['split']})",
        "",
        f"- command: `{results.get('command') or 'python API'}`",
        f"- questions: {ds['evaluated']} of {ds['questions_total']} (seed {ds['seed']}, limit {ds['limit']}); "
        f"{ds['with_qrels']} with qrels, {ds['answerable']} answerable, {ds['unanswerable']} unanswerable",
        f"- dataset fingerprint: `{ds['fingerprint'][:16]}…`",
        f"- machine: {machine['cpu']} ({machine['cpus']} cpus), Python {machine['python']}; started {results['started']}, "
        f"{results['elapsed_s']:.1f}s",
        "",
    ]
    for title, part, keys in (
        ("Retrieval", "retrieval", RETRIEVAL_KEYS),
        ("Answers", "answers", ANSWER_KEYS),
        ("Cost (means per question)", "cost", COST_KEYS + ["wall_p50_s", "wall_p95_s"]),
    ):
        table = _table(summary, part, keys)
        if table:
            lines += [f"## {title}", ""] + table
    if any(s["cost"].get("calls") for s in summary.values()):
        lines += [
            "LLM calls and tokens count replies served from the cache at their original cost (so plans "
            "compare fairly); `cached calls/q` says how many were. Wall time is per question, end to end.",
            "",
        ]
    judged = {p: s["cost"] for p, s in summary.items() if s["cost"].get("judge_calls")}
    for plan, cost in judged.items():
        lines += [f"Judge ({plan}): {cost['judge_calls']} calls, {cost['judge_tokens']} tokens (not in the plan's cost).", ""]
    errors = {p: s["errors"] for p, s in summary.items() if s["errors"]}
    if errors:
        lines += [f"Questions whose answer failed (scored as empty): {errors}", ""]
    if len(summary) > 1:
        lines += ["## Where the plans differ", ""] + _wins(rows, list(summary), primary_metric(summary))
    lines += ["Plots: `plots/metric_per_plan.png`, `plots/cost_vs_quality.png`. Metric definitions: `tools/metrics.py`.", ""]
    return "\n".join(lines)
