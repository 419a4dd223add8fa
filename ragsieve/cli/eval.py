"""`ragsieve eval`: the evaluation subcommand (added to the main parser by `ragsieve.cli.main`)."""

from __future__ import annotations

import argparse
import shlex
import sys

from ragsieve.cli.common import add_common, add_device_option, add_llm_options, load_config, plural, with_device


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval",
        help="measure plans on a BEIR-layout dataset (retrieval, answers, cost)",
        description="Run one or more plans side by side on a BEIR folder (corpus.jsonl[.gz], queries.jsonl, "
        "qrels/<split>.tsv, optional qa.jsonl) and write results.json, report.md, plots and "
        "per_question.jsonl under --out. Interrupted runs resume; the LLM cache makes reruns free.",
    )
    p.add_argument("dataset", metavar="DATASET", help="BEIR-layout folder")
    add_common(p)
    add_llm_options(p)
    p.add_argument(
        "--plan",
        action="append",
        metavar="NAME",
        help="plan to evaluate; repeat to compare plans side by side (default: the config's plan)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="evaluate N questions, sampled with --seed (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the question sample (default 0)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: ragsieve-eval/<dataset>-<split>)")
    p.add_argument("--split", default="test", help="qrels split: qrels/<split>.tsv (default test)")
    p.add_argument(
        "--retrieval-only",
        action="store_true",
        help="first-stage retrieval metrics only, no LLM call (fast, for large query sets)",
    )
    p.add_argument("--judge", action="store_true", help="also grade answers with the LLM (prompts/judge_answer.j2)")
    p.add_argument("--no-cache", action="store_true", help="do not use the LLM reply cache (default: <out>/llm-cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_device_option(p)
    p.set_defaults(func=cmd_eval)
    return p


def command_line(args: argparse.Namespace) -> str:
    """The canonical command for `args` (recorded in results.json)."""
    parts = ["ragsieve", "eval", args.dataset, "--index", args.index]
    for plan in args.plan or []:
        parts += ["--plan", plan]
    for flag in ("limit", "out", "config", "base_url", "model", "local_model", "device"):
        value = getattr(args, flag, None)
        if value is not None:
            parts += ["--" + flag.replace("_", "-"), str(value)]
    if args.seed != 0:
        parts += ["--seed", str(args.seed)]
    if args.split != "test":
        parts += ["--split", args.split]
    parts += [f"--{flag.replace('_', '-')}" for flag in ("retrieval_only", "judge", "no_cache") if getattr(args, flag)]
    return shlex.join(parts)


def cmd_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ragsieve.agent.errors import UsageError
    from ragsieve.eval.evaluate import Evaluation
    from ragsieve.eval.report import LABELS
    from ragsieve.insights.eval_set import EXPORT_MARK
    from ragsieve.tools.extras import Extra, require

    require(Extra.EVAL, "matplotlib", "ragsieve eval (its report's plots)")  # before any question is spent
    if args.retrieval_only:
        unused = [f"--{f.replace('_', '-')}" for f in ("base_url", "model", "local_model", "no_cache") if getattr(args, f)]
        if unused:
            raise UsageError(f"--retrieval-only makes no LLM call, so {', '.join(unused)} would do nothing: drop it")
    config = with_device(load_config(args), getattr(args, "device", None))
    export = (Path(args.dataset) / EXPORT_MARK).is_file()  # an insights export: its corpus is a few documents
    if not args.retrieval_only and not config.llm.resolved().base_url:
        print(
            f"ragsieve eval: no LLM endpoint named (--base-url, [llm] base_url or OPENAI_BASE_URL): answering "
            f"with the embedded model {config.llm.local_model} (--local-model)",
            file=sys.stderr,
        )
    evaluation = Evaluation(
        args.dataset,
        args.index,
        plans=args.plan,
        config=config,
        out=args.out,
        limit=args.limit,
        seed=args.seed,
        split=args.split,
        retrieval_only=args.retrieval_only,
        judge=args.judge,
        cache=not args.no_cache,
        progress=not args.no_progress and sys.stderr.isatty(),
        command=command_line(args),
        build_missing=not export,
    )
    results = evaluation.run()
    for plan, summary in results["plans"].items():
        figures = {**summary["retrieval"], **summary["answers"]}
        shown = ", ".join(f"{LABELS[k]} {v:.3f}" for k, v in figures.items() if k in LABELS and v is not None)
        cost = summary["cost"]
        print(
            f"{plan} ({summary['questions']} questions): {shown}; wall p50 {cost['wall_p50_s']:.3f}s "
            f"p95 {cost['wall_p95_s']:.3f}s; {plural(cost['total_calls'], 'LLM call')}"
        )
    print(f"wrote {evaluation.out}/results.json, report.md, plots/ and per_question.jsonl")
    return 0
