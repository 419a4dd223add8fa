"""Aggregates, `results.json`, `report.md` and PNG plots of an evaluation run (`ragsieve.eval.evaluate`)."""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from importlib import metadata
from itertools import combinations
from pathlib import Path
from typing import Any

from ragsieve.tools.extras import Extra, require
from ragsieve.tools.metrics import mean, p50_p95

log = logging.getLogger(__name__)

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
PLOTTED = [
    "fs_ndcg@10",
    "fs_recall@100",
    "fs_mrr",
    "ctx_ndcg@10",
    "gold_fraction",
    "em",
    "f1",
    "abstain_correct",
    "squad2_f1",
    "judge_correct",
]
VERSIONED = [
    "ragsieve",
    "numpy",
    "faiss-cpu",
    "sentence-transformers",
    "torch",
    "bm25s",
    "rank-bm25",
    "flashrank",
    "openai",
    "pydantic",
    "scikit-learn",
    "xllamacpp",
]


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def source_commit() -> str | None:
    """The git commit of the ragsieve source tree this runs from (a checkout or an editable install; "+dirty"
    when it has uncommitted changes), None for an installed wheel: a result names the code that produced it."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


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


def plot(results: dict[str, Any], folder: Path) -> list[Path]:
    """Two PNGs: grouped bars of the quality metrics per plan; headline metric vs cost per plan."""
    matplotlib = require(Extra.EVAL, "matplotlib", "the evaluation's plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["plans"]
    folder.mkdir(parents=True, exist_ok=True)
    plans = list(summary)
    merged = {p: {**s["retrieval"], **s["answers"]} for p, s in summary.items()}
    keys = [k for k in PLOTTED if any(merged[p].get(k) is not None for p in plans)]
    fig, ax = plt.subplots(figsize=(min(14, 3 + 0.6 * len(keys) * max(1, len(plans)) ** 0.5), 4.5))
    width = 0.8 / max(1, len(plans))
    for i, plan in enumerate(plans):
        xs = [j + i * width for j in range(len(keys))]
        ax.bar(xs, [merged[plan].get(k) or 0.0 for k in keys], width, label=plan)
    ax.set_xticks([j + width * (len(plans) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels([LABELS[k] for k in keys], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Quality per plan ({Path(results['dataset']['folder']).name}, n={results['dataset']['evaluated']})")
    ax.legend()
    fig.tight_layout()
    first = folder / "metric_per_plan.png"
    fig.savefig(first, dpi=110)
    plt.close(fig)

    key = primary_metric(summary)
    part = "answers" if key in ANSWER_KEYS else "retrieval"
    tokens = [s["cost"].get("prompt_tokens", 0) + s["cost"].get("completion_tokens", 0) for s in summary.values()]
    use_tokens = any(tokens)
    xs = tokens if use_tokens else [s["cost"]["wall_p50_s"] or 0.0 for s in summary.values()]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for plan, x in zip(plans, xs):
        y = summary[plan][part].get(key) or 0.0
        ax.scatter([x], [y], s=60)
        ax.annotate(plan, (x, y), textcoords="offset points", xytext=(5, 5))
    ax.set_ylim(0, 1.05)
    ax.set_xlim(left=0, right=max(xs + [1e-9]) * 1.25)
    ax.set_xlabel("LLM tokens per question (prompt + completion)" if use_tokens else "wall time p50 per question (s)")
    ax.set_ylabel(LABELS[key])
    ax.set_title("Cost vs quality")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    second = folder / "cost_vs_quality.png"
    fig.savefig(second, dpi=110)
    plt.close(fig)
    return [first, second]


def write_outputs(results: dict[str, Any], rows: list[dict[str, Any]], out: Path) -> None:
    """results.json, report.md and plots/*.png under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    results["plots"] = [str(p.relative_to(out)) for p in plot(results, out / "plots")]
    (out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    (out / "report.md").write_text(render_report(results, rows), encoding="utf-8")
    log.info("wrote %s", out / "results.json")
