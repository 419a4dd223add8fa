"""`fast` vs `agentic` on HotpotQA (two-hop) and a seeded SQuAD 2.0 sample, in one run.

    .venv/bin/python -m benchmarks.pipeline.agentic [--limit 20] [--sets hotpotqa,squad2] [--squad-sample 40]

Per question and plan: both-gold recall at the first 5 context chunks (every
gold paragraph among them), gold-paragraph recall over the whole final context
(share of gold paragraphs in it), SQuAD EM/F1 against the gold answers, LLM
calls and tokens, wall time. Also the first-stage (retrieval only) both-gold
recall at 5 and 10, and for `agentic` how the loop ended (judge modes, stop
reason, fallback, whether the selection equals the fast context), plus the
per-question check that `agentic` never has lower both-gold recall than `fast`.

The LLM is the embedded llama.cpp model by default; OPENAI_BASE_URL /
OPENAI_API_KEY / OPENAI_MODEL (or RAGSIEVE_*) select any OpenAI-compatible
endpoint instead, unchanged. Indexes are built once into --index-root and
reused. Writes one JSON file (default benchmarks/results/agentic[-LABEL].json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from benchmarks.bench_io import header  # noqa: E402  (this folder)
from benchmarks.pipeline.data import OracleChat  # noqa: E402
from benchmarks.pipeline.oracle_texts import ChunkTexts  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.agent.llm.factory import describe_endpoint, open_llm  # noqa: E402
from ragsieve.agent.orchestrator import Orchestrator  # noqa: E402
from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.metrics import answer_scores, chunk_doc_id, gold_passage_recall, mean, unique_in_order  # noqa: E402

DATA = REPO.parent / "shared" / "data"
PLANS = ("fast", "agentic")


def load_hotpotqa(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in open(folder / "qa.jsonl", encoding="utf-8")]
    return [
        {
            "id": r["id"],
            "question": r["question"],
            "answers": r["answers"],
            "gold": r["gold_doc_ids"],
            "impossible": False,
            "type": r.get("type", ""),
        }
        for r in rows
    ]


def load_squad2(folder: Path, sample: int, unanswerable: int, seed: int) -> list[dict]:
    """A seeded sample of `sample` answerable questions, then `unanswerable` unanswerable ones."""
    rows = [json.loads(line) for line in open(folder / "qa.jsonl", encoding="utf-8")]
    rng = random.Random(seed)
    answerable = [r for r in rows if not r["is_impossible"]]
    impossible = [r for r in rows if r["is_impossible"]]
    picked = rng.sample(answerable, min(sample, len(answerable))) + rng.sample(impossible, min(unanswerable, len(impossible)))
    return [
        {
            "id": r["id"],
            "question": r["question"],
            "answers": r["answers"],
            "gold": [] if r["is_impossible"] else [r["gold_doc_id"]],
            "impossible": bool(r["is_impossible"]),
            "type": "unanswerable" if r["is_impossible"] else "answerable",
        }
        for r in picked
    ]


def docs_of(chunk_ids) -> list[str]:
    """The documents of `chunk_ids`, first occurrence order."""
    return unique_in_order(chunk_doc_id(c) for c in chunk_ids)


def both_gold(doc_ids: list[str], gold: list[str]) -> float | None:
    return float(gold_passage_recall(doc_ids, gold).all_found) if gold else None


def run_question(orch: Orchestrator, q: dict, plan: str) -> dict:
    started = time.perf_counter()
    result = orch.ask(q["question"], plan=plan)
    wall = time.perf_counter() - started
    ctx_docs = docs_of(h.chunk_id for h in result.context)
    top5_docs = docs_of(h.chunk_id for h in result.context[:5])
    row = {
        "plan": plan,
        "wall_s": round(wall, 2),
        "calls": result.usage.calls,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "context": [h.chunk_id for h in result.context],
        "answer": result.answer,
        "both_gold@5": both_gold(top5_docs, q["gold"]),
        "gold_recall": gold_passage_recall(ctx_docs, q["gold"]).fraction if q["gold"] else None,
        **answer_scores(result.answer, q["answers"], q["impossible"]),
        "steps": [f"{e.step}:{e.outcome}" for e in result.trace],
    }
    if plan == "agentic":
        loop = result.loop
        row.update(
            {
                "loop_stop": loop.stop_reason,
                "judge_modes": [r.mode for r in loop.rounds],
                "judge_reasons": [r.reason for r in loop.rounds],
                "order_check": [
                    {"compared": r.order_check["compared"], "flipped": len(r.order_check["flipped"])}
                    for r in loop.rounds
                    if r.order_check
                ],
                "same_as_fast": loop.selection.get("same_as_fast"),
                "fallback": result.fallback.model_dump() if result.fallback else None,
                "resolved": result.resolved,
                # what the combination rule saw: lets a replay score other rules on the same verdicts
                # on the same verdicts (the loop's verdicts do not depend on the rule)
                "selection_inputs": {
                    "first_stage": list(result.first_stage),
                    "trusted": {} if loop.distrusted else loop.trusted,
                    "discovered": loop.discovered,
                    "neighbour_of": loop.neighbour_of,
                },
            }
        )
    first_docs = docs_of(result.first_stage)
    row["first_stage_both_gold@5"] = both_gold(first_docs[:5], q["gold"])
    row["first_stage_both_gold@10"] = both_gold(first_docs[:10], q["gold"])
    return row


def summarise(rows: list[dict]) -> dict:
    out: dict = {"questions": len({r["qid"] for r in rows})}
    for plan in PLANS:
        mine = [r for r in rows if r["plan"] == plan]
        if not mine:
            continue
        n = len(mine)
        out[plan] = {
            "both_gold@5": mean(r["both_gold@5"] for r in mine),
            "gold_recall": mean(r["gold_recall"] for r in mine),
            "em": mean(r.get("em") for r in mine),
            "f1": mean(r.get("f1") for r in mine),
            "abstain_correct": mean(r.get("abstain_correct") for r in mine),
            "calls_per_q": sum(r["calls"] for r in mine) / n,
            "tokens_per_q": sum(r["prompt_tokens"] + r["completion_tokens"] for r in mine) / n,
            "wall_s_per_q": sum(r["wall_s"] for r in mine) / n,
        }
    fast = {r["qid"]: r for r in rows if r["plan"] == "fast"}
    agentic = [r for r in rows if r["plan"] == "agentic"]
    if fast and agentic:
        paired = [
            (r["qid"], r["both_gold@5"] - fast[r["qid"]]["both_gold@5"])
            for r in agentic
            if r["both_gold@5"] is not None and fast.get(r["qid"])
        ]
        worse, better = [q for q, d in paired if d < 0], [q for q, d in paired if d > 0]
        modes = [m for r in agentic for m in r["judge_modes"]]
        out["agentic_vs_fast"] = {
            "questions_worse_both_gold@5": worse,
            "questions_better_both_gold@5": better,
            "selection_same_as_fast": sum(1 for r in agentic if r["same_as_fast"]),
            "judge_rounds_by_mode": {m: modes.count(m) for m in sorted(set(modes))},
            "fallback_taken": sum(1 for r in agentic if r["fallback"]),
        }
    first = {r["qid"]: r for r in rows}  # first-stage figures are the same for every plan of a question
    out["first_stage_both_gold@5"] = mean(r["first_stage_both_gold@5"] for r in first.values())
    out["first_stage_both_gold@10"] = mean(r["first_stage_both_gold@10"] for r in first.values())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="hotpotqa,squad2")
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    ap.add_argument("--squad-sample", type=int, default=40, help="answerable SQuAD 2.0 questions (seeded)")
    ap.add_argument("--squad-unanswerable", type=int, default=0, help="unanswerable ones added (seeded)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--plans", default=",".join(PLANS), help="plans to run, comma-separated (default: both)")
    ap.add_argument("--config", default=None, help="a ragsieve TOML config")
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-bench-index"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="LLM request timeout and retry budget in seconds (a loaded 2-core machine needs minutes)",
    )
    ap.add_argument(
        "--oracle-judge",
        type=float,
        default=None,
        metavar="FLIP",
        help="no LLM: the pipeline benchmark's oracle (`data.OracleChat`: a judge that knows the gold paragraphs, "
        "each verdict flipped with probability FLIP; a reader that answers iff its context holds the answer)",
    )
    args = ap.parse_args(argv)
    config = Config.load(args.config)
    config.llm = config.llm.model_copy(update={"timeout_s": args.timeout, "max_retry_s": args.timeout})
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in sets if s not in ("hotpotqa", "squad2")]
    if unknown:
        ap.error(f"unknown set(s) {unknown}: choose from hotpotqa, squad2")
    plans = [p.strip() for p in args.plans.split(",") if p.strip()]
    if not plans or any(p not in PLANS for p in plans):
        ap.error(f"--plans {args.plans!r}: choose from {', '.join(PLANS)}")
    oracle = OracleChat(ChunkTexts([]), args.oracle_judge) if args.oracle_judge is not None else None
    endpoint = describe_endpoint(config.llm) if oracle is None else f"oracle judge, flip={args.oracle_judge}"
    print(f"LLM: {endpoint}", flush=True)
    suffix = f"-{args.label}" if args.label else ""
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"agentic{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if oracle is None:
        llm, close = open_llm(config.llm)
    else:
        from ragsieve.agent.llm.client import LLM

        llm, close = LLM(oracle), (lambda: None)
    report: dict = {
        **header(),
        "llm": endpoint,
        "config": {
            "loop": config.loop.model_dump(),
            "fallback": config.fallback.model_dump(),
            "retrieval": config.retrieval.model_dump(),
        },
        "sets": {},
    }
    try:
        for name in sets:
            folder = DATA / name
            questions = (
                load_hotpotqa(folder)
                if name == "hotpotqa"
                else load_squad2(folder, args.squad_sample, args.squad_unanswerable, args.seed)
            )
            questions = questions[: args.limit] if args.limit else questions
            index_dir = Path(args.index_root) / name
            built = IndexBuilder(index_dir, progress=False, chunk_tokens=config.index.chunk_tokens).build(
                [folder / "corpus.jsonl"]
            )
            print(f"{name}: {built.chunks_total} chunks, {built.sparse_rows} sparse; {len(questions)} questions", flush=True)
            rows: list[dict] = []
            orch = Orchestrator.open(index_dir, config, llm=llm)
            if oracle is not None:
                store = orch.index.store
                oracle.chunks = ChunkTexts((c.text, c.doc_id) for c in store.get_many(range(store.count())))
            try:
                for i, q in enumerate(questions, start=1):
                    if oracle is not None:
                        oracle.q = {"id": q["id"], "gold": list(q["gold"]), "answers": q.get("answers") or []}
                    for plan in plans:
                        row = {"qid": q["id"], "type": q["type"], **run_question(orch, q, plan)}
                        rows.append(row)
                        report["sets"][name] = {"partial": True, "summary": summarise(rows), "rows": rows}
                        out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
                        print(
                            f"[{name} {i}/{len(questions)}] {plan:8s} both_gold@5={row['both_gold@5']} "
                            f"f1={row.get('f1', row.get('abstain_correct'))} calls={row['calls']} "
                            f"{row['wall_s']}s {row.get('loop_stop') or ''}",
                            flush=True,
                        )
            finally:
                orch.close()
            report["sets"][name] = {
                "summary": summarise(rows),
                "index": {"chunks": built.chunks_total, "sparse_rows": built.sparse_rows},
                "rows": rows,
            }
            print(json.dumps({name: report["sets"][name]["summary"]}, indent=1), flush=True)
    finally:
        close()
    report["load_average_at_end"] = os.getloadavg()
    out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
