"""`ragsieve feedback export`: the chat page's and widget's rated answers as an evaluation dataset."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "feedback",
        help="export the thumbs up/down given on the chat page and widget",
        description="Feedback is stored by `ragsieve serve` in DATA_DIR/feedback.sqlite3.",
    )
    sub = p.add_subparsers(dest="feedback_command", required=True)
    e = sub.add_parser(
        "export",
        help="write a BEIR-layout dataset that `ragsieve eval` reads",
        description="Thumbs-up answers become questions with their cited documents as qrels and the "
        "answer as gold answer; every rated answer is kept whole in feedback.jsonl.",
    )
    e.add_argument("--data-dir", default=".ragsieve-data", help="the serve command's --data-dir")
    e.add_argument("--index", required=True, metavar="NAME=DIR", help="the served index the feedback is about")
    e.add_argument("--out", required=True, metavar="DIR", help="dataset folder to write (replaced)")
    e.set_defaults(func=run_export)
    return p


def run_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ragsieve.agent.errors import UsageError
    from ragsieve.service.feedback.export import export
    from ragsieve.service.feedback.store import FILE_NAME, FeedbackStore
    from ragsieve.service.indexes.registry import parse_index_specs
    from ragsieve.tools.index.engines.open import open_index

    ((name, folder),) = parse_index_specs([args.index]).items()
    db = Path(args.data_dir) / FILE_NAME
    if not db.is_file():
        raise UsageError(f"no feedback store at {db}: give the --data-dir `ragsieve serve` used")
    rated = FeedbackStore(db).rated(index=name)
    index = open_index(folder)
    try:
        counts = export(rated, index.store, args.out)
    finally:
        index.close()
    print(
        f"wrote {args.out}: {counts['questions']} approved questions over {counts['documents']} documents "
        f"(of {counts['rated']} rated answers, {counts['thumbs_down']} thumbs down kept in feedback.jsonl); "
        f"evaluate with: ragsieve eval {args.out} --index {folder}",
        file=sys.stderr,
    )
    if not counts["questions"]:
        print(
            "ragsieve: warning: no thumbs-up answer with citations yet, so the dataset has no question for "
            "`ragsieve eval`; feedback.jsonl holds what was rated",
            file=sys.stderr,
        )
    return 0
