"""Stage ablation of the card's pipeline on HotpotQA, SQuAD 2.0 and SciFact, per judge.

    .venv/bin/python benchmarks/pipeline.py [--sets hotpotqa,squad2,scifact] [--judges oracle,oracle-flip10,oracle-flip25]
    .venv/bin/python benchmarks/pipeline.py --sets hotpotqa --judges embedded-0.5b --limit 5 --label embedded

Plans (cumulative): fast; +judge (judge <-> expand, answer); +judge+fallback (the `agentic` plan:
validation and the COS-Mix fallback); +conformal, +gmm, +rse (each stage added after the judge,
no validation); full (the `full` plan: +rse with the final answer validated and the fallback);
full-R (full, with the first stage over R and the fallback over S). Judges: `oracle` knows the
gold, `oracle-flipN` flips N % of its verdicts (seeded), `embedded-0.5b` is the packaged model
(or any endpoint in OPENAI_BASE_URL/OPENAI_MODEL, unchanged). The oracle also reads and validates
(see `pipeline_data.OracleChat`): its EM/F1 say whether the context holds the answer. `--reader gullible`
(`pipeline_data.GullibleChat`) reads like a fooled model: it also answers an unanswerable SQuAD 2.0 question
when a plausible (wrong) answer is in its context, so abstention measures what a plan puts there.

Also, per dataset: the sparse subset's share, and the conformal set's held-out coverage on the
final context at alpha 0.05 / 0.1 / 0.2 (plan retrieve -> conformal -> answer) for the calibrated
score kind and for raw similarity (CONFLARE's own score): any gold document in the context (`coverage`), every
gold document (`all_gold`) and per (question, gold document) pair (`per_gold`, the event HotpotQA's one-record-
per-hop calibration targets). SciFact is calibrated on the other half of its test claims (`--scifact-calibration
train`: on the train claims). Writes benchmarks/results/pipeline[-LABEL].json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_io import commit  # noqa: E402
from pipeline_coverage import coverage  # noqa: E402
from pipeline_data import (  # noqa: E402
    REPO,
    GullibleChat,
    OracleChat,
    build_index,
    calibrated_copies,
    load_questions,
    measure_judge_on_folds,
)
from pipeline_rows import (  # noqa: E402
    alternate,
    error_row,
    merged,
    per_fold,
    resumed,
    row_commits,
    row_for,
    rule_counts,
    stage_agreement,
    summarise,
)

from ragsieve.agent.calibration import load_calibration  # noqa: E402
from ragsieve.agent.config import Config, PlanSpec  # noqa: E402
from ragsieve.agent.llm.client import LLM  # noqa: E402
from ragsieve.agent.orchestrator import Orchestrator  # noqa: E402
from ragsieve.tools.index.building.encoder_choice import recorded_encoder
from ragsieve.tools.index.embedders.device import default_encoder  # noqa: E402
from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402

END = "end"
LOOP = {"retrieve": {"next": "judge"}, "judge": {"next": "expand"}}
VALIDATED = {"answer": {"next": "validate"}, "validate": {"resolved": END, "unresolved": "fallback", "exhausted": END}}


def _chain(*stages: str) -> dict:
    steps = ["expand", *stages, "answer"]
    edges = {**LOOP, "expand": {"grew": "judge", "converged": steps[1]}}
    for a, b in zip(steps[1:], steps[2:]):
        edges[a] = {"next": b}
    edges["answer"] = {"next": END}
    return edges


PLANS: dict[str, PlanSpec | None] = {
    "fast": None,
    "+judge": PlanSpec(start="retrieve", transitions=_chain()),
    "+judge+fallback": None,  # the shipped `agentic` plan
    "+conformal": PlanSpec(start="retrieve", transitions=_chain("conformal")),
    "+gmm": PlanSpec(start="retrieve", transitions=_chain("conformal", "outliers")),
    "+rse": PlanSpec(start="retrieve", transitions=_chain("conformal", "outliers", "segments")),
    "full": None,
    "full-R": None,  # `full` with retrieval.exclude_sparse
}
SHIPPED = {"fast": "fast", "+judge+fallback": "agentic", "full": "full", "full-R": "full"}
OVERRIDES: list[str] = []  # --override SECTION.FIELD=JSON, applied to every plan
COVERAGE_KINDS: list[str | None] = [None, "raw"]  # None: the calibrated kind; raw: CONFLARE's own score
STARTED = time.time()
COVERAGE_PLAN = PlanSpec(start="retrieve", transitions={"retrieve": {"next": "conformal"},
                                                       "conformal": {"next": "answer"}, "answer": {"next": END}})


def config_for(plan: str, alpha: float | None = None, kind: str | None = None, combine: str | None = None) -> Config:
    cfg = Config()
    cfg.plans = {k: v for k, v in PLANS.items() if v is not None} | {"coverage": COVERAGE_PLAN}
    cfg.loop = cfg.loop.model_copy(update={"judge_concurrency": 1, **({"combine": combine} if combine else {})})
    if plan == "full-R":
        cfg.retrieval = cfg.retrieval.model_copy(update={"exclude_sparse": True})
    for item in OVERRIDES:
        section, _, rest = item.partition(".")
        field, _, value = rest.partition("=")
        parsed = json.loads(value) if value not in ("", None) else None
        setattr(cfg, section, getattr(cfg, section).model_validate({**getattr(cfg, section).model_dump(), field: parsed}))
    if alpha is not None or kind is not None:
        cfg.conformal = cfg.conformal.model_copy(update={"alpha": alpha, "score_kind": kind})
    return cfg


def ask_row(q: dict, plan: str, orchs: dict, llm, chat, args, name: str, judge: str) -> dict:
    """One question under one plan: its row (see `pipeline_rows.row_for`)."""
    orch = orchs[q["fold"]]
    orch.config, orch._llm = config_for(plan, combine=args.combine), llm
    if chat is not None:
        chat.q = q
    started = time.perf_counter()
    answer = orch.ask(q["question"], plan=SHIPPED.get(plan, plan))
    return row_for(q, answer, time.perf_counter() - started, name, judge, plan)


def make_llm(judge: str, doc_of_text: dict, text_of_doc: dict, timeout: float, reader: str = "oracle"):
    """The scripted judge (`oracle`, `oracle-flipN`) with the oracle or the gullible reader, or a real model."""
    if judge.startswith("oracle"):
        flip = int(judge.split("flip")[1]) / 100 if "flip" in judge else 0.0
        chat = (GullibleChat if reader == "gullible" else OracleChat)(doc_of_text, text_of_doc, flip)
        return LLM(chat), chat, (lambda: None)
    from ragsieve.agent.llm.factory import open_llm

    cfg = config_for("fast").llm.model_copy(update={"timeout_s": timeout, "max_retry_s": timeout})  # --override llm.*
    llm, close = open_llm(cfg)
    return llm, None, close


def run_dataset(name: str, args, embedder, out_rows: list, report: dict) -> None:
    questions = load_questions(name, squad_answerable=args.squad_answerable, squad_unanswerable=args.squad_unanswerable,
                               seed=args.seed, scifact_calibration=args.scifact_calibration)
    if name == "squad2" and args.squad_evaluate:  # a subset of the sample (calibration still excludes all of it)
        n_ans, n_una = (int(x) for x in args.squad_evaluate.split(","))
        questions = [q for q in questions if not q["impossible"]][:n_ans] + [q for q in questions if q["impossible"]][:n_una]
    if args.limit and args.spread and len(questions) > args.limit:  # evenly spaced: SQuAD's unanswerable are last
        questions = [questions[round(i * (len(questions) - 1) / (args.limit - 1))] for i in range(args.limit)] \
            if args.limit > 1 else questions[:1]
    elif args.limit:
        questions = questions[: args.limit]
    index_dir = build_index(name, Path(args.index_root), embedder)
    folds = calibrated_copies(name, index_dir, questions, alpha=0.1, scifact_calibration=args.scifact_calibration)
    orchs = {f: Orchestrator.open(p, Config()) for f, p in folds.items()}
    first = next(iter(orchs.values())).index
    texts = {first.store.get(r).text[:200]: first.store.get(r).doc_id for r in range(len(first))}
    doc_text = {d: t for t, d in texts.items()}
    report.setdefault("device", first.embedding_placement())  # where the encoder ran (the judges are scripted or remote)
    report["sets"][name] = {"questions": len(questions), "chunks": len(first), "encoder": recorded_encoder(index_dir),
                            "sparse_rows": len(first.sparse_rows),
                            "sparse_share": round(len(first.sparse_rows) / max(1, len(first)), 4), "rows": {},
                            "calibrated_kinds": {str(f): load_calibration(p)[0].score_kind for f, p in folds.items()},
                            "abstention_calibration": {str(f): _abstention_report(p) for f, p in folds.items()}}
    print(f"{name}: {len(questions)} questions, {len(first)} chunks, sparse share "
          f"{report['sets'][name]['sparse_share']}", flush=True)
    for judge in args.judges:
        llm, chat, close = make_llm(judge, texts, doc_text, args.timeout, args.reader)
        try:
            if (args.combine or Config().loop.combine) == "auto" and args.judge_questions:
                measured = measure_judge_on_folds(folds, orchs, llm, chat, args.judge_questions)
                report["sets"][name].setdefault("judge_reliability", {})[judge] = measured
                print(f"  {judge:14} measured: " + "; ".join(
                    f"fold {f}: recall {m['judge_recall']} (n={m['n']}) fast {m['fast_recall']} pool {m['pool_recall']}" for f, m in measured.items()), flush=True)
            plans = [p for p in args.plans if not (judge == "embedded-0.5b" and p == "full-R")]
            if args.interleave:
                interleaved(name, questions, orchs, llm, chat, judge, plans, args, out_rows, report)
                continue
            for plan in plans:
                rows = [ask_row(q, plan, orchs, llm, chat, args, name, judge) for q in questions]
                out_rows.extend(rows)
                summary = summarise(rows)
                report["sets"][name]["rows"][f"{judge}|{plan}"] = summary | {"rule": rule_counts(rows),
                                                                             "folds": per_fold(rows)}
                print(f"  {judge:14} {plan:16} {json.dumps(summary)}", flush=True)
        finally:
            close()
    if args.coverage:
        report["sets"][name]["coverage"] = coverage(questions, orchs, texts, doc_text, config_for, COVERAGE_KINDS)
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
        print(f"  {judge:14} {name} q{len(rows[plans[0]])}: " + " ".join(
            f"{p}={asked[p].get('gold_recall')}/{asked[p].get('abstained')}" for p in plans)
            + (f" (error: {failed[0]['error'][:120]})" if failed else ""), flush=True)
    for plan in plans:
        out_rows.extend(rows[plan])
        report["sets"][name]["rows"][f"{judge}|{plan}"] = summarise(rows[plan]) | {
            "rule": rule_counts(rows[plan]), "folds": per_fold(rows[plan]), "budget_stopped": stopped,
            "questions_available": len(questions)}
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="hotpotqa,squad2,scifact")
    ap.add_argument("--judges", default="oracle,oracle-flip10,oracle-flip25")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each set (state n)")
    ap.add_argument("--spread", action="store_true", help="with --limit: N evenly spaced questions, not the first N")
    ap.add_argument("--squad-answerable", type=int, default=200)
    ap.add_argument("--squad-unanswerable", type=int, default=50)
    ap.add_argument("--squad-evaluate", default=None, metavar="A,U",
                    help="evaluate only the first A answerable and U unanswerable questions of the SQuAD sample "
                         "(the sample is still drawn, and kept out of calibration, as without it)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--reader", choices=["oracle", "gullible"], default="oracle",
                    help="the scripted judges' reader: oracle (answers iff the gold answer is in its context) or "
                         "gullible (also answers an unanswerable question with a plausible answer in its context)")
    ap.add_argument("--no-coverage", dest="coverage", action="store_false")
    ap.add_argument("--scifact-calibration", choices=["crossfit", "train"], default="crossfit",
                    help="SciFact calibration questions: the other half of the test claims, or the train claims")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-pipeline-index"))
    ap.add_argument("--label", default="")
    ap.add_argument("--judge-questions", type=int, default=60,
                    help="combine=auto: calibration questions per fold the judge is measured on (0: not measured)")
    ap.add_argument("--combine", default=None, choices=["auto", "relevant", "union", "anchored"],
                    help="loop.combine for every plan (default: the shipped default)")
    ap.add_argument("--merge", action="store_true",
                    help="add this run's rows to an existing results file of the same label (other plans or sets)")
    ap.add_argument("--interleave", action="store_true",
                    help="every plan on a question before the next (paired rows; answerable/unanswerable in turn)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="with --interleave: no new question after this many seconds from the start (n reached is stated)")
    ap.add_argument("--max-errors", type=int, default=3,
                    help="with --interleave: questions whose ask raised before no new question is asked")
    ap.add_argument("--checkpoint", default=None, help="with --interleave: append each row to this JSONL as it is done")
    ap.add_argument("--resume", action="store_true",
                    help="with --checkpoint: reuse the rows a stopped run wrote there instead of asking those questions again")
    ap.add_argument("--override", action="append", default=[], metavar="SECTION.FIELD=JSON",
                    help="a config setting for every plan, e.g. segments.keep_evidence=false")
    ap.add_argument("--coverage-kinds", default="calibrated,raw",
                    help="score kinds whose final-context coverage is measured: calibrated and/or raw")
    args = ap.parse_args(argv)
    OVERRIDES.extend(args.override)
    COVERAGE_KINDS[:] = [None if k.strip() == "calibrated" else k.strip() for k in args.coverage_kinds.split(",") if k.strip()]
    args.judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    args.plans = [p.strip() for p in args.plans.split(",") if p.strip()]
    bad = [p for p in args.plans if p not in PLANS] + \
        [j for j in args.judges if j not in ("oracle", "oracle-flip10", "oracle-flip25", "embedded-0.5b")]
    if bad:
        ap.error(f"unknown plans/judges: {bad}")
    out = REPO / "benchmarks" / "results" / f"pipeline{'-' + args.label if args.label else ''}.json"
    report = {"command": shlex.join([sys.executable, *sys.argv]), "commit": commit(), "load_average": os.getloadavg(),
              "combine": args.combine or Config().loop.combine, "overrides": args.override, "reader": args.reader,
              "scifact_calibration": args.scifact_calibration,
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
              "defaults": Config().model_dump(include={"loop", "conformal", "outliers", "segments", "fallback",
                                                       "retrieval"}), "sets": {}}
    rows: list[dict] = []
    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2", encoder=default_encoder())  # a new index: the shipped default
    started = time.time()
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        run_dataset(name, args, embedder, rows, report)
    report["seconds"] = round(time.time() - started, 1)
    report["load_average_end"] = os.getloadavg()
    if args.merge and out.is_file():
        report, rows = merged(out, report, rows, list(PLANS))
    report["rows"] = [{"dataset": d, "judge": k.split("|")[0], "plan": k.split("|")[1], **v}
                      for d, s in report["sets"].items() for k, v in s["rows"].items()]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (out.with_suffix(".questions.jsonl")).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
