"""The files of an evaluation run: `results.json`, `report.md` and two PNG plots."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ragsieve.eval.report import ANSWER_KEYS, LABELS, primary_metric, render_report
from ragsieve.tools.extras import Extra, require

log = logging.getLogger(__name__)

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
