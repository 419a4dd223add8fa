"""`ragsieve calibrate`: conformal calibration of an index (see `ragsieve.agent.calibration`)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ragsieve.cli.common import add_common, add_llm_options, load_config
from ragsieve.tools.filters.conformal import ScoreKind
from ragsieve.tools.modes import choices

log = logging.getLogger(__name__)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "calibrate",
        help="calibrate the conformal context threshold of an index",
        description="Generate one question per sampled chunk with the LLM (or read a BEIR qrels set), find the "
        "first chunk by similarity that contains each answer, and store conformal thresholds with a "
        "held-out coverage report in <index>/calibration.json.",
    )
    add_common(p)
    add_llm_options(p)
    p.add_argument(
        "--alpha", type=float, default=0.1, help="miscoverage: keep the answer's chunk with probability >= 1-alpha (default 0.1)"
    )
    p.add_argument(
        "--questions", type=int, default=None, help="questions to generate (default 50), or to sample from --qrels (default: all)"
    )
    p.add_argument("--depth", type=int, default=20, help="chunks walked per question to find the answer (default 20)")
    p.add_argument("--seed", type=int, default=0, help="sampling and split seed (default 0)")
    p.add_argument("--heldout", type=float, default=0.5, help="held-out fraction for the coverage report (default 0.5)")
    p.add_argument(
        "--score",
        default="auto",
        choices=["auto", *choices(ScoreKind)],
        help="nonconformity score (default auto: the one keeping fewest chunks at coverage; the hybrid "
        "kinds score the fused dense + BM25 ranking)",
    )
    p.add_argument("--qrels", metavar="TSV", help="BEIR qrels file: use these questions instead of generating")
    p.add_argument("--queries", metavar="JSONL", help="BEIR queries.jsonl for --qrels")
    p.add_argument(
        "--judge",
        type=int,
        default=0,
        metavar="N",
        help="also measure the configured judge on N calibration questions (one judge pass over each "
        "question's candidate pool, with loop.judge_decoys control chunks hidden in it); "
        "loop.combine = auto uses its recall, and bars a judge that calls too many controls "
        "relevant (loop.trust_decoy_rate) (default 0: not measured)",
    )
    p.add_argument(
        "--unanswerable",
        metavar="JSONL",
        help="questions known to have no answer in this corpus, one JSON object per line with a "
        '"question" (or "text") field; rows with "is_impossible": false are skipped (SQuAD 2.0\'s '
        "qa.jsonl works as it is). Calibrates abstention on them instead of the label-free proxy "
        "(each calibration question asked with its own document held out)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=handler)
    return p


def handler(args: argparse.Namespace) -> int:
    from ragsieve.agent.calibration import Calibrator, format_report, load_calibration, save_calibration
    from ragsieve.agent.errors import UsageError
    from ragsieve.agent.judging.bounds import barred_under
    from ragsieve.agent.orchestrator import Orchestrator

    if args.judge < 0:
        raise UsageError(f"--judge takes a number of questions >= 0, got {args.judge}")
    if bool(args.qrels) != bool(args.queries):
        raise UsageError("--qrels and --queries go together (a BEIR qrels tsv and its queries.jsonl)")
    config = load_config(args)
    with Orchestrator.open(args.index, config) as orch:
        index = orch.index
        previous, warnings = load_calibration(
            index.root, index.manifest.get("corpus_fingerprint"), index.manifest.get("embedding")
        )
        for w in warnings:
            print(f"ragsieve: warning: previous calibration: {w}", file=sys.stderr)
        llm = None if args.qrels else orch.llm
        llm_name = "" if llm is None else str(llm.chat.model_name)
        calibrator = Calibrator(
            index,
            llm=llm,
            prompts=orch.prompts,
            alpha=args.alpha,
            depth=args.depth,
            seed=args.seed,
            heldout_fraction=args.heldout,
            score_kind=args.score,
            llm_name=llm_name,
        )
        questions = args.questions if args.questions is not None else (None if args.qrels else 50)
        cal = calibrator.run(
            questions=questions,
            queries_path=args.queries,
            qrels_path=args.qrels,
            unanswerable=read_unanswerable(args.unanswerable) if args.unanswerable else None,
        )
        if args.judge:
            measured = measure_configured_judge(orch, cal, args.judge)
            cal = cal.model_copy(update={"judges": {**(previous.judges if previous else {}), measured.model: measured}})
        elif previous is not None and previous.judges:
            cal = cal.model_copy(update={"judges": previous.judges})  # re-measure with --judge N if the corpus changed
        path = save_calibration(cal, index.root)
    if args.json:
        print(
            json.dumps(
                {
                    "path": str(path),
                    "score_kind": cal.score_kind,
                    "n_not_found": cal.n_not_found,
                    "n_generation_failed": cal.n_generation_failed,
                    "report": cal.report,
                    "abstention": None if cal.abstention is None else cal.abstention.report(config.abstention.max_false_answer),
                },
                indent=2,
            )
        )
    else:
        print(format_report(cal))
        for name, j in cal.judges.items():
            recall = "n/a" if j.judge_recall is None else f"{j.judge_recall:.3f}"
            print(
                f"judge {name}: recall {recall} on {j.n} questions with the answer's chunk in the pool of {j.pool}"
                f" (false positives {j.false_positive_rate}; decoys called relevant {j.decoys_relevant} of "
                f"{j.decoys}; near misses called relevant {j.near_misses_relevant} of {j.near_misses}; "
                f"verdicts changed in reversed order {j.order_flipped} of {j.order_compared}; {j.failed} failed)"
            )
            barred, why = barred_under(j, config.loop)
            if barred:
                print(f"judge {name} decides nothing under loop.combine = auto: {why}")
        if cal.abstention is not None:
            ab = cal.abstention.report(config.abstention.max_false_answer)
            print(
                f"abstention ({ab['origin']}, {ab['signal']}): cutoff {ab['threshold']} at false-answer rate "
                f"<= {ab['max_false_answer']}; held-out: unanswerable overruled {ab['false_answerable']} "
                f"(n={ab['n_unanswerable']}), answerable detected {ab['answerable_detected']} (n={ab['n_answerable']})"
            )
        print(f"saved {path}" + (" (replacing the previous calibration)" if previous is not None else ""))
    return 0


def read_unanswerable(path: str) -> list[str]:
    """Question texts from a JSONL file (`question` or `text`; `is_impossible: false` rows skipped)."""
    from pathlib import Path

    from ragsieve.agent.errors import UsageError

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--unanswerable file not found: {file}")
    out = []
    for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{file}:{number} is not a JSON object ({exc})") from exc
        if not isinstance(row, dict):
            raise UsageError(f"{file}:{number} is not a JSON object")
        if row.get("is_impossible", True) is False:
            continue
        text = row.get("question") or row.get("text")
        if isinstance(text, str) and text.strip():
            out.append(text.strip())
    if not out:
        raise UsageError(f'--unanswerable {file}: no question found (a "question" or "text" field per line)')
    return out


def measure_configured_judge(orch, cal, n: int):
    """The configured judge's recall on the first `n` calibration questions that found their chunk."""
    from ragsieve.agent.judging.checks import pick_decoys
    from ragsieve.agent.judging.measure import llm_judge, measure_judge

    llm, store, pool, loop = orch.llm, orch.index.store, orch.config.retrieval.pool, orch.config.loop
    records = [r for r in cal.records if r.found and r.positive_row is not None][:n]
    items = ((r.question, {store.get(r.positive_row).chunk_id}, orch.retrieve(r.question, top_k=pool)) for r in records)
    model = str(llm.chat.model_name or "unknown")
    return measure_judge(
        items,
        llm_judge(llm, orch.prompts, loop),
        model=model,
        pool=pool,
        top_k=orch.config.retrieval.top_k,
        decoys=lambda question, exclude: pick_decoys(orch.index, question, exclude, loop.judge_decoys),
        order_k=loop.final_k if loop.judge_order_check else None,  # the loop's order check, measured
    )
