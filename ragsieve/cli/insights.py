"""`ragsieve insights`: what the logged questions reveal (topics the documents miss, answers marked wrong,
documents cited and never reached), as text, JSON or CSV; `--export-eval` writes a topic group as an eval set."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

from ragsieve.cli.common import add_config_option, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "insights",
        help="what users asked that the documents do not answer (needs [insights] enabled in serve)",
        description="Reads the question log `ragsieve serve` writes when [insights] enabled = true "
        "(DATA_DIR/insights.sqlite3) and reports, for one index: unanswered questions grouped by topic "
        "(with a weekly trend, examples and the closest passages the index has), answers marked wrong "
        "or low-confidence, the most cited documents and those no question reached.",
    )
    p.add_argument("--index", required=True, metavar="NAME=DIR", help="the served index (its name in the log)")
    p.add_argument(
        "--data-dir",
        default=".ragsieve-data",
        help="the serve command's --data-dir (default: %(default)s; [insights] dir in --config wins)",
    )
    add_config_option(p, "the TOML config serve used ([insights] group_distance, dir)")
    p.add_argument("--since", default="30d", help="period: 30d, 12h, 6w or an ISO date (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--csv", metavar="FILE", help="also write one CSV line per logged question of the period")
    p.add_argument("--export-eval", metavar="GROUP", help="write topic group GROUP (g1, g2 ...) as an evaluation set")
    p.add_argument("--out", metavar="DIR", help="the folder --export-eval writes (BEIR layout `ragsieve eval` reads)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ragsieve.agent.errors import UsageError
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.insights.compute import insights_for
    from ragsieve.insights.eval_set import eval_command, write_eval_set
    from ragsieve.insights.log import FILE_NAME, QuestionLog
    from ragsieve.insights.report import parse_since, to_csv
    from ragsieve.service.indexes.registry import parse_index_specs

    if bool(args.export_eval) != bool(args.out):
        raise UsageError("--export-eval GROUP and --out DIR go together")
    config = load_config(args)
    ((name, folder),) = parse_index_specs([args.index]).items()
    db = Path(config.insights.dir or args.data_dir) / FILE_NAME
    if not db.is_file():
        raise UsageError(
            f"no question log at {db}: switch on [insights] enabled in serve's config and give the --data-dir it used"
        )
    now = time.time()
    try:
        since = parse_since(args.since, now)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    log = QuestionLog(db, retention_days=config.insights.retention_days, max_rows=config.insights.max_rows)
    with Orchestrator.open(folder, config) as orch:
        report, records = insights_for(log, name, orch, since=since, until=now, distance=config.insights.group_distance)
        if args.export_eval:
            group = next((g for g in report.groups if g.id == args.export_eval), None)
            if group is None:
                raise UsageError(
                    f"no group {args.export_eval!r}: the report has {', '.join(g.id for g in report.groups) or 'no group'}"
                )
            counts = write_eval_set(group, {r.id: r.question for r in records}, orch.index.store, args.out, name)
            print(
                f"wrote {args.out}: {counts['questions']} questions of group {group.id} ({group.label!r}); once "
                f"the missing page is indexed, run: {eval_command(args.out, folder, config.llm)}",
                file=sys.stderr,
            )
    if args.csv:
        Path(args.csv).write_text(to_csv(report, records), encoding="utf-8")
    if args.json:
        print(report.model_dump_json(indent=2))
    elif not args.export_eval:
        print(text_report(report))
    return 0


def _shown(text: str) -> str:
    """A logged question on a terminal: control characters (escape sequences) shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)


def text_report(report) -> str:
    day = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d")  # noqa: E731
    t = report.totals
    lines = [
        f"insights of {report.index}, {day(report.since)} to {day(report.until)}: {t['questions']} questions, "
        f"{t['answered']} answered, {t['passages']} answered with passages, {t['abstained_model']} abstained "
        f"(model), {t['abstained_calibration']} abstained (calibration), {t['abstained_ungrounded']} abstained "
        f"(cited nothing); {t['thumbs_down']} thumbs down, "
        f"{t['low_confidence']} low confidence",
        "",
        "Topics the documents miss (unanswered questions):",
    ]
    for g in report.groups:
        trend = " ".join(str(n) for _, n in g.trend)
        lines.append(f"  {g.id}  {g.count:>5}  {g.label}   [per week: {trend}]")
        lines += [f"          - {q}" for q in g.examples[1:4]]
        if g.closest:
            lines.append(f"          closest: {', '.join(c['source'] for c in g.closest)}")
    if not report.groups:
        lines.append("  none")
    lines += ["", f"Answered but marked wrong or low confidence: {len(report.flagged)}"]
    lines += [
        f"  {day(f.at)}  {f.why:<15} {f.question}" + (f"  (x{f.count})" if f.count > 1 else "") for f in report.flagged[:10]
    ]
    lines += ["", "Most cited documents:"] + [f"  {n:>5}  {d}" for d, n in report.most_cited[:10]]
    lines += ["", f"Documents no question reached: {report.unreached_total}"] + [f"  {d}" for d in report.unreached[:20]]
    lines += ["", report.clustered]
    return "\n".join(_shown(line) for line in lines)
