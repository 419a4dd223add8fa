"""The pipeline benchmark's per-question rows and their summaries (`benchmarks/pipeline/main.py`): one row per
(question, plan) with gold recall, context size, answer scores and the context rule applied; the summary of a
plan's rows (abstention as a detector of unanswerable questions included); the order and the resumption of
an interleaved run."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ragsieve.tools.ingest.chunking import count_tokens
from ragsieve.tools.metrics import answer_scores, chunk_doc_id, gold_passage_recall, mean, unique_in_order


def row_for(q: dict, answer, seconds: float, dataset: str, judge: str, plan: str) -> dict:
    ctx_docs = unique_in_order(chunk_doc_id(h.chunk_id) for h in answer.context)
    recall = gold_passage_recall(ctx_docs, q["gold"]) if q["gold"] else None
    scores = answer_scores(answer.answer, q["answers"], q["impossible"]) if dataset != "scifact" else {}
    return {
        "dataset": dataset,
        "judge": judge,
        "plan": plan,
        "qid": q["id"],
        "impossible": q["impossible"],
        "gold_recall": recall.fraction if recall else None,
        "both_gold": float(recall.all_found) if recall and dataset == "hotpotqa" else None,
        "context_chunks": len(answer.context),
        "context_tokens": sum(count_tokens(h.chunk.text) for h in answer.context),
        "llm_calls": answer.usage.calls,
        "prompt_tokens": answer.usage.prompt_tokens,
        "completion_tokens": answer.usage.completion_tokens,
        "step_tokens": step_tokens(answer),
        "seconds": round(seconds, 3),
        "em": scores.get("em"),
        "f1": scores.get("f1"),
        "abstained": scores.get("abstained"),
        "resolved": answer.resolved,
        "abstention": answer.abstention,
        "rule": answer_rule(answer),
        "fold": q.get("fold"),
        **conformal_fields(answer),
        **stage_recalls(answer, q["gold"], dataset),
    }


def step_tokens(answer) -> dict[str, int]:
    """Prompt + completion tokens per step name over the run (a judge's rounds summed), for the cost breakdown."""
    out: dict[str, int] = {}
    for event in answer.trace:
        used = event.usage.prompt_tokens + event.usage.completion_tokens
        if used:
            out[event.step] = out.get(event.step, 0) + used
    return out


def conformal_fields(answer) -> dict:
    """Whether every conformal-set member reached the answer's context (itself or inside a segment), and
    whether the answer states its coverage as guaranteed (issue 46: stages keep what they promise)."""
    conformal = getattr(answer, "conformal", None)
    if conformal is None:
        return {}
    final = {h.chunk_id for h in answer.context} | {c for s in answer.segments for c in s.chunk_ids}
    return {
        "members_kept": float(set(conformal.passing) <= final),
        "coverage_guaranteed": conformal.guaranteed,
        "coverage_reduced": [r.value for r in conformal.reduced],
    }


def per_fold(rows: list[dict], alpha: float = 0.1) -> dict[str, dict]:
    """Coverage measured per calibration fold on answerable questions (each fold is calibrated on the other's
    questions): `per_gold` (mean share of gold documents in the final context, HotpotQA's calibrated event),
    `any_gold`, the rules applied, the share whose conformal members all reached the answer, and the target
    1 - alpha - 2 s.e. at that fold's n."""
    out: dict[str, dict] = {}
    for fold in sorted({r.get("fold") for r in rows if r.get("fold") is not None}):
        ans = [r for r in rows if r.get("fold") == fold and not r["impossible"] and r["gold_recall"] is not None]
        if not ans:
            continue
        n = len(ans)
        out[str(fold)] = {
            "n": n,
            "per_gold": mean(r["gold_recall"] for r in ans),
            "any_gold": mean(float(r["gold_recall"] > 0) for r in ans),
            "target": round(1 - alpha - 2 * math.sqrt(alpha * (1 - alpha) / n), 4),
            "rules": rule_counts(ans),
            "members_kept": mean(r["members_kept"] for r in ans if "members_kept" in r),
            "coverage_guaranteed": mean(float(r["coverage_guaranteed"]) for r in ans if "coverage_guaranteed" in r),
        }
    return out


# The first pass of a plan's filter steps, read from the trace: (step, the stage it completes as an ablation plan
# name, the summary key holding the context after it). The context after step k is the final context of the
# plan that stops after step k (the same steps on the same replies), so one `full` run gives every stage.
STAGES = (
    ("expand", "+judge", "context"),
    ("conformal", "+conformal", "kept"),
    ("outliers", "+gmm", "kept"),
    ("segments", "+rse", "context"),
)


def summary_of(event) -> dict:
    """A trace event's summary as a dict, on today's code (typed summaries) and on a baseline tree's (dicts)."""
    return event.summary_dict() if hasattr(event, "summary_dict") else dict(event.summary)


def stage_contexts(trace) -> dict[str, list[str]]:
    """Chunk ids of the context after each filter step's first run (before any fallback pass); a step that
    was disabled or did not run is left out."""
    out: dict[str, list[str]] = {}
    for event in trace:
        for step, stage, key in STAGES:
            summary = summary_of(event)
            if event.step != step or stage in out or summary.get("status") == "disabled":
                continue
            if step == "expand" and event.outcome != "converged":
                continue
            ids = summary.get(key, summary.get("kept"))
            if ids is not None:
                out[stage] = list(ids)
    return out


def stage_recalls(answer, gold, dataset: str) -> dict:
    """`stages`: gold recall after each filter step of the first pass (`stage_contexts`), then `final` (the
    answer's context); `stages_both`: HotpotQA's both-gold after each. Empty for a plan with no filter step
    or a question without gold."""
    stages = stage_contexts(getattr(answer, "trace", None) or [])
    if not stages or not gold:
        return {}
    stages["final"] = [h.chunk_id for h in answer.context]
    recalls = {s: gold_passage_recall(unique_in_order(chunk_doc_id(c) for c in ids), gold) for s, ids in stages.items()}
    out = {"stages": {s: r.fraction for s, r in recalls.items()}}
    if dataset == "hotpotqa":
        out["stages_both"] = {s: float(r.all_found) for s, r in recalls.items()}
    return out


def answer_rule(answer) -> str:
    """The context rule applied (loop.combine, auto resolved); "-" when no step chose one."""
    loop = getattr(answer, "loop", None)
    why = getattr(loop, "rule_reason", None) or ""
    return why.split(" (")[0] if why else "-"


def summarise(rows: list[dict]) -> dict:
    ans = [r for r in rows if not r["impossible"]]
    unans = [r for r in rows if r["impossible"]]
    return {
        "n": len(rows),
        "gold_recall": mean(r["gold_recall"] for r in ans),
        "both_gold_recall": mean(r["both_gold"] for r in ans),
        "context_chunks": mean(r["context_chunks"] for r in rows),
        "context_tokens": mean(r["context_tokens"] for r in rows),
        "llm_calls": mean(r["llm_calls"] for r in rows),
        "seconds": mean(r["seconds"] for r in rows),
        "em": mean(r["em"] for r in ans),
        "f1": mean(r["f1"] for r in ans),
        "abstain_unanswerable": mean(float(r["abstained"]) for r in unans) if unans else None,
        "abstain_answerable": mean(float(r["abstained"]) for r in ans if r["abstained"] is not None),
        **abstention_quality(rows),
        **stage_means(ans),
    }


def stage_agreement(rows: dict[str, list[dict]]) -> dict[str, dict[str, int]]:
    """When a run has the prefix plans beside `full` (paired rows): per stage, on how many answerable questions
    the stage's gold recall inside the `full` run equals the prefix plan's own final gold recall."""
    full = {r["qid"]: r.get("stages") or {} for r in rows.get("full", [])}
    out = {}
    for stage in ("+judge", "+conformal", "+gmm", "+rse"):
        pairs = [
            (full[r["qid"]][stage], r["gold_recall"])
            for r in rows.get(stage, [])
            if stage in full.get(r["qid"], {}) and r["gold_recall"] is not None
        ]
        if pairs:
            out[stage] = {"questions": len(pairs), "equal": sum(a == b for a, b in pairs)}
    return out


def stage_means(rows: list[dict]) -> dict:
    """Per-stage gold recall (and both-gold) over the answerable rows that recorded stages: the stages of the
    default plan from its own trace (`stage_recalls`); `stage_n` rows carried them. Empty when none did."""
    staged = [r for r in rows if r.get("stages")]
    if not staged:
        return {}
    names = list(dict.fromkeys(s for r in staged for s in r["stages"]))
    out = {
        "stage_n": len(staged),
        "stage_gold_recall": {s: mean(r["stages"][s] for r in staged if s in r["stages"]) for s in names},
    }
    if any(r.get("stages_both") for r in staged):
        out["stage_both_gold"] = {s: mean(r["stages_both"][s] for r in staged if s in r.get("stages_both", {})) for s in names}
    return out


def abstention_quality(rows: list[dict]) -> dict:
    """Abstention as a detector of unanswerable questions: precision (abstentions that were on
    unanswerable questions) and recall (unanswerable questions abstained on); None without both kinds."""
    judged = [r for r in rows if r["abstained"] is not None]
    if not any(r["impossible"] for r in judged) or all(r["impossible"] for r in judged):
        return {"abstain_precision": None, "abstain_recall": None}
    abstained = [r for r in judged if r["abstained"]]
    hits = sum(1 for r in abstained if r["impossible"])
    return {
        "abstain_precision": hits / len(abstained) if abstained else None,
        "abstain_recall": hits / sum(1 for r in judged if r["impossible"]),
    }


def rule_counts(rows: list[dict]) -> dict[str, int]:
    """How many rows applied each context rule ("resumed": a checkpoint row written before rows recorded it)."""
    out: dict[str, int] = {}
    for r in rows:
        out[r.get("rule", "resumed")] = out.get(r.get("rule", "resumed"), 0) + 1
    return out


def alternate(questions: list[dict]) -> list[dict]:
    """Answerable and unanswerable questions taken in turn (a run stopped early still has both kinds)."""
    kinds = [[q for q in questions if not q["impossible"]], [q for q in questions if q["impossible"]]]
    out = []
    for i in range(max(map(len, kinds))):
        out.extend(k[i] for k in kinds if i < len(k))
    return out


def resumed(args, name: str, judge: str, plans: list[str]) -> dict[tuple[str, str], dict]:
    """--resume: the rows an interrupted run already appended to --checkpoint, by (qid, plan), for
    this set and judge; a question is skipped only when every plan's row is there."""
    path = Path(args.checkpoint) if args.checkpoint else None
    if not args.resume or path is None or not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut by the interruption
            continue
        if (
            row.get("dataset") == name and row.get("judge") == judge and row.get("plan") in plans and "error" not in row
        ):  # a question that raised is asked again
            out[row["qid"], row["plan"]] = row
    return out


def error_row(q: dict, plan: str, name: str, judge: str, exc: BaseException, seconds: float) -> dict:
    """The row of a question whose ask raised: what raised, and how long it took."""
    return {
        "dataset": name,
        "judge": judge,
        "plan": plan,
        "qid": q["id"],
        "impossible": q["impossible"],
        "error": f"{type(exc).__name__}: {str(exc)[:300]}",
        "seconds": round(seconds, 3),
    }


def row_commits(rows: list[dict]) -> dict[str, int]:
    """How many rows each commit wrote ("unrecorded" for checkpoint rows from before rows named it)."""
    out: dict[str, int] = {}
    for row in rows:
        key = row.get("commit") or "unrecorded"
        out[key] = out.get(key, 0) + 1
    return out


def size_distribution(sizes: list[int]) -> dict:
    """A set's size (chunks) over the questions: mean, min, percentiles, max."""
    from ragsieve.tools.metrics import percentile

    if not sizes:
        return {}
    return {
        "mean": sum(sizes) / len(sizes),
        "min": min(sizes),
        "p25": percentile(sizes, 25),
        "p50": percentile(sizes, 50),
        "p75": percentile(sizes, 75),
        "p90": percentile(sizes, 90),
        "max": max(sizes),
    }


def merged(out: Path, report: dict, rows: list[dict], plan_order: list[str]) -> tuple[dict, list[dict]]:
    """An earlier run's results with this run's (same keys: this run wins; rows sorted by judge, then by
    `plan_order`); both commands kept."""
    old = json.loads(out.read_text(encoding="utf-8"))
    for name, info in report["sets"].items():
        into = old["sets"].setdefault(name, info)
        if into is not info:
            both = {**into.get("rows", {}), **info["rows"]}
            judges = list(dict.fromkeys(k.split("|")[0] for k in both))
            into["rows"] = dict(
                sorted(both.items(), key=lambda kv: (judges.index(kv[0].split("|")[0]), plan_order.index(kv[0].split("|")[1])))
            )
            for key in ("judge_reliability", "coverage"):
                if info.get(key):
                    into[key] = info[key]
    old["command"] = "; ".join(c for c in (old.get("command"), report["command"]) if c)
    old["commits_merged"] = [*old.get("commits_merged", [old.get("commit")]), report.get("commit")]
    old["seconds"] = round((old.get("seconds") or 0) + report["seconds"], 1)
    old["load_average_merged"] = [*old.get("load_average_merged", [old.get("load_average")]), report["load_average"]]
    done = {(r["dataset"], r["judge"], r["plan"]) for r in rows}
    previous = out.with_suffix(".questions.jsonl")
    kept = [
        r
        for r in map(json.loads, previous.read_text(encoding="utf-8").splitlines() if previous.is_file() else [])
        if (r["dataset"], r["judge"], r["plan"]) not in done
    ]
    return old, kept + rows
