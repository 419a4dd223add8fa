"""Running the stage ablation on one dataset (`benchmarks/pipeline/main.py`): one row per question and plan, the
plans one after another or interleaved (paired rows, checkpointed, a time and error budget), per judge.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from benchmarks.pipeline.coverage import coverage
from benchmarks.pipeline.data.folds import build_index, calibrated_copies, load_questions
from benchmarks.pipeline.data.judged import measure_judge_on_folds
from benchmarks.pipeline.data.readers import GullibleChat, OracleChat
from benchmarks.pipeline.judges import FAMILY, family_chat
from benchmarks.pipeline.oracle_texts import ChunkTexts
from benchmarks.pipeline.plans import COVERAGE_KINDS, SHIPPED, config_for
from benchmarks.pipeline.rows import (
    alternate,
    error_row,
    per_fold,
    resumed,
    row_commits,
    row_for,
    rule_counts,
    stage_agreement,
    summarise,
)
from ragsieve.agent.calibration import load_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.tools.index.building.encoder_choice import recorded_encoder

STARTED = time.time()


def ask_row(q: dict, plan: str, orchs: dict, llm, chat, args, name: str, judge: str) -> dict:
    """One question under one plan: its row (see `pipeline_rows.row_for`)."""
    orch = orchs[q["fold"]]
    orch.config, orch._llm = config_for(plan, combine=args.combine), llm
    if chat is not None:
        chat.q = q
    started = time.perf_counter()
    answer = orch.ask(q["question"], plan=SHIPPED.get(plan, plan))
    return row_for(q, answer, time.perf_counter() - started, name, judge, plan)


def make_llm(judge: str, chunks: ChunkTexts, timeout: float, reader: str = "oracle"):
    """The scripted judge (`oracle`, `oracle-flipN`, one of the behavioural family `judges.FAMILY`) with the oracle or
    the gullible reader, or a real model."""
    if judge in FAMILY:
        chat = family_chat(judge, chunks, reader)
        return LLM(chat), chat, (lambda: None)
    if judge.startswith("oracle"):
        flip = int(judge.split("flip")[1]) / 100 if "flip" in judge else 0.0
        chat = (GullibleChat if reader == "gullible" else OracleChat)(chunks, flip)
        return LLM(chat), chat, (lambda: None)
    from ragsieve.agent.llm.factory import open_llm

    cfg = config_for("fast").llm.model_copy(update={"timeout_s": timeout, "max_retry_s": timeout})  # --override llm.*
    llm, close = open_llm(cfg)
    return llm, None, close


def run_dataset(name: str, args, embedder, out_rows: list, report: dict) -> None:
    questions = load_questions(
        name,
        squad_answerable=args.squad_answerable,
        squad_unanswerable=args.squad_unanswerable,
        seed=args.seed,
        scifact_calibration=args.scifact_calibration,
    )
    if name == "squad2" and args.squad_evaluate:  # a subset of the sample (calibration still excludes all of it)
        n_ans, n_una = (int(x) for x in args.squad_evaluate.split(","))
        questions = [q for q in questions if not q["impossible"]][:n_ans] + [q for q in questions if q["impossible"]][:n_una]
    if args.limit and args.spread and len(questions) > args.limit:  # evenly spaced: SQuAD's unanswerable are last
        questions = (
            [questions[round(i * (len(questions) - 1) / (args.limit - 1))] for i in range(args.limit)]
            if args.limit > 1
            else questions[:1]
        )
    elif args.limit:
        questions = questions[: args.limit]
    index_dir = build_index(name, Path(args.index_root), embedder)
    folds = calibrated_copies(name, index_dir, questions, alpha=0.1, scifact_calibration=args.scifact_calibration)
    orchs = {f: Orchestrator.open(p, Config()) for f, p in folds.items()}
    first = next(iter(orchs.values())).index
    chunks = ChunkTexts((c.text, c.doc_id) for c in (first.store.get(r) for r in range(len(first))))
    report.setdefault("device", first.embedding_placement())  # where the encoder ran (the judges are scripted or remote)
    report["sets"][name] = {
        "questions": len(questions),
        "chunks": len(first),
        "encoder": recorded_encoder(index_dir),
        "sparse_rows": len(first.sparse_rows),
        "sparse_share": round(len(first.sparse_rows) / max(1, len(first)), 4),
        "rows": {},
        "calibrated_kinds": {str(f): load_calibration(p)[0].score_kind for f, p in folds.items()},
        "abstention_calibration": {str(f): _abstention_report(p) for f, p in folds.items()},
    }
    print(
        f"{name}: {len(questions)} questions, {len(first)} chunks, sparse share {report['sets'][name]['sparse_share']}",
        flush=True,
    )
    for judge in args.judges:
        llm, chat, close = make_llm(judge, chunks, args.timeout, args.reader)
        try:
            if (args.combine or Config().loop.combine) == "auto" and args.judge_questions:
                measured = measure_judge_on_folds(folds, orchs, llm, chat, args.judge_questions)
                report["sets"][name].setdefault("judge_reliability", {})[judge] = measured
                print(
                    f"  {judge:14} measured: "
                    + "; ".join(
                        f"fold {f}: recall {m['judge_recall']} (n={m['n']}) fast {m['fast_recall']} pool {m['pool_recall']} "
                        f"decoys {m['decoys_relevant']}/{m['decoys']}"
                        for f, m in measured.items()
                    ),
                    flush=True,
                )
            plans = [p for p in args.plans if not (judge == "embedded-0.5b" and p == "full-R")]
            if args.interleave:
                interleaved(name, questions, orchs, llm, chat, judge, plans, args, out_rows, report)
                continue
            for plan in plans:
                rows = [ask_row(q, plan, orchs, llm, chat, args, name, judge) for q in questions]
                out_rows.extend(rows)
                summary = summarise(rows)
                report["sets"][name]["rows"][f"{judge}|{plan}"] = summary | {"rule": rule_counts(rows), "folds": per_fold(rows)}
                print(f"  {judge:14} {plan:16} {json.dumps(summary)}", flush=True)
        finally:
            close()
    if args.coverage:
        report["sets"][name]["coverage"] = coverage(questions, orchs, chunks, config_for, COVERAGE_KINDS)
    for orch in orchs.values():
        orch._llm = None
        orch.close()


def interleaved(name, questions, orchs, llm, chat, judge, plans, args, out_rows, report) -> None:
    """Every plan on one question before the next (paired rows), each row appended to
    `--checkpoint` as it is written, no new question once `--budget-s` seconds have passed since the run began: the n reached is
    stated in the summary (`n`) and `budget_stopped`. A question whose ask raised is left out of every plan's summary
    (rows stay paired) and listed under `errors`; after `--max-errors` of them no new question is asked."""
    rows: dict[str, list[dict]] = {p: [] for p in plans}
    done = resumed(args, name, judge, plans)
    reused: list[dict] = []
    errors: list[dict] = []
    errored = 0  # questions with an error row
    stopped = False
    for q in alternate(questions):
        if all((q["id"], p) in done for p in plans):  # --resume: this question's rows came from the checkpoint
            for plan in plans:
                rows[plan].append(done[q["id"], plan])
                reused.append(done[q["id"], plan])
            continue
        if args.budget_s and time.time() - STARTED > args.budget_s:
            stopped = True
            break
        if errored >= args.max_errors:
            stopped = "errors"
            break
        asked = {}
        for plan in plans:
            started = time.perf_counter()
            try:
                row = ask_row(q, plan, orchs, llm, chat, args, name, judge)
            except Exception as exc:  # one question's fault is a row, not the end of a long run
                row = error_row(q, plan, name, judge, exc, time.perf_counter() - started)
            asked[plan] = row | {"commit": report["commit"]}
            if args.checkpoint:
                with open(args.checkpoint, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(asked[plan]) + "\n")
        failed = [r for r in asked.values() if "error" in r]
        errors.extend({"qid": r["qid"], "plan": r["plan"], "error": r["error"]} for r in failed)
        errored += bool(failed)
        if not failed:
            for plan in plans:
                rows[plan].append(asked[plan])
        print(
            f"  {judge:14} {name} q{len(rows[plans[0]])}: "
            + " ".join(f"{p}={asked[p].get('gold_recall')}/{asked[p].get('abstained')}" for p in plans)
            + (f" (error: {failed[0]['error'][:120]})" if failed else ""),
            flush=True,
        )
    for plan in plans:
        out_rows.extend(rows[plan])
        report["sets"][name]["rows"][f"{judge}|{plan}"] = summarise(rows[plan]) | {
            "rule": rule_counts(rows[plan]),
            "folds": per_fold(rows[plan]),
            "budget_stopped": stopped,
            "questions_available": len(questions),
        }
    if stage_agreement(rows):  # the prefix plans ran beside `full`: do its in-run stages match them?
        report["sets"][name]["stage_agreement"] = stage_agreement(rows)
    if reused:  # rows a resumed run took from the checkpoint, by the commit that wrote them
        report["sets"][name]["resumed_rows"] = row_commits(reused)
    if errors:
        report["sets"][name].setdefault("errors", {})[judge] = errors


def _abstention_report(path: Path) -> dict | None:
    """The calibrated abstention's cutoff and held-out error rates at the configured false-answer rate."""
    cal = load_calibration(path)[0]
    return None if cal.abstention is None else cal.abstention.report(Config().abstention.max_false_answer)
