"""The pipeline benchmark's per-question rows and their summaries (`benchmarks/pipeline.py`): one row per
(question, plan) with gold recall, context size, answer scores and the context rule applied; the summary of a
plan's rows (abstention as a detector of unanswerable questions included); the order and the resumption of
an interleaved run."""
from __future__ import annotations

import json
from pathlib import Path

from ragsieve.tools.ingest.chunking import count_tokens
from ragsieve.tools.metrics import answer_scores, chunk_doc_id, gold_passage_recall, mean, unique_in_order


def row_for(q: dict, answer, seconds: float, dataset: str, judge: str, plan: str) -> dict:
    ctx_docs = unique_in_order(chunk_doc_id(h.chunk_id) for h in answer.context)
    recall = gold_passage_recall(ctx_docs, q["gold"]) if q["gold"] else None
    scores = answer_scores(answer.answer, q["answers"], q["impossible"]) if dataset != "scifact" else {}
    return {"dataset": dataset, "judge": judge, "plan": plan, "qid": q["id"], "impossible": q["impossible"],
            "gold_recall": recall.fraction if recall else None,
            "both_gold": float(recall.all_found) if recall and dataset == "hotpotqa" else None,
            "context_chunks": len(answer.context), "context_tokens": sum(count_tokens(h.chunk.text) for h in answer.context),
            "llm_calls": answer.usage.calls, "seconds": round(seconds, 3),
            "em": scores.get("em"), "f1": scores.get("f1"), "abstained": scores.get("abstained"),
            "resolved": answer.resolved, "abstention": answer.abstention, "rule": answer_rule(answer)}


def answer_rule(answer) -> str:
    """The context rule applied (loop.combine, auto resolved); "-" when no step chose one."""
    loop = getattr(answer, "loop", None)
    why = getattr(loop, "rule_reason", None) or ""
    return why.split(" (")[0] if why else "-"


def summarise(rows: list[dict]) -> dict:
    ans = [r for r in rows if not r["impossible"]]
    unans = [r for r in rows if r["impossible"]]
    return {"n": len(rows), "gold_recall": mean(r["gold_recall"] for r in ans),
            "both_gold_recall": mean(r["both_gold"] for r in ans),
            "context_chunks": mean(r["context_chunks"] for r in rows), "context_tokens": mean(r["context_tokens"] for r in rows),
            "llm_calls": mean(r["llm_calls"] for r in rows), "seconds": mean(r["seconds"] for r in rows),
            "em": mean(r["em"] for r in ans), "f1": mean(r["f1"] for r in ans),
            "abstain_unanswerable": mean(float(r["abstained"]) for r in unans) if unans else None,
            "abstain_answerable": mean(float(r["abstained"]) for r in ans if r["abstained"] is not None),
            **abstention_quality(rows)}


def abstention_quality(rows: list[dict]) -> dict:
    """Abstention as a detector of unanswerable questions: precision (abstentions that were on
    unanswerable questions) and recall (unanswerable questions abstained on); None without both kinds."""
    judged = [r for r in rows if r["abstained"] is not None]
    if not any(r["impossible"] for r in judged) or all(r["impossible"] for r in judged):
        return {"abstain_precision": None, "abstain_recall": None}
    abstained = [r for r in judged if r["abstained"]]
    hits = sum(1 for r in abstained if r["impossible"])
    return {"abstain_precision": hits / len(abstained) if abstained else None,
            "abstain_recall": hits / sum(1 for r in judged if r["impossible"])}


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
        if row.get("dataset") == name and row.get("judge") == judge and row.get("plan") in plans \
                and "error" not in row:  # a question that raised is asked again
            out[row["qid"], row["plan"]] = row
    return out


def error_row(q: dict, plan: str, name: str, judge: str, exc: BaseException, seconds: float) -> dict:
    """The row of a question whose ask raised: what raised, and how long it took."""
    return {"dataset": name, "judge": judge, "plan": plan, "qid": q["id"], "impossible": q["impossible"],
            "error": f"{type(exc).__name__}: {str(exc)[:300]}", "seconds": round(seconds, 3)}


def row_commits(rows: list[dict]) -> dict[str, int]:
    """How many rows each commit wrote ("unrecorded" for checkpoint rows from before rows named it)."""
    out: dict[str, int] = {}
    for row in rows:
        key = row.get("commit") or "unrecorded"
        out[key] = out.get(key, 0) + 1
    return out


def size_distribution(sizes: list[int]) -> dict:
    """The final context's size (chunks) over the questions: min, percentiles, max."""
    from ragsieve.tools.metrics import percentile

    if not sizes:
        return {}
    return {"min": min(sizes), "p25": percentile(sizes, 25), "p50": percentile(sizes, 50),
            "p75": percentile(sizes, 75), "p90": percentile(sizes, 90), "max": max(sizes)}
