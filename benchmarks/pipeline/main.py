"""Stage ablation of the card's pipeline on HotpotQA, SQuAD 2.0 and SciFact, per judge.

    .venv/bin/python -m benchmarks.pipeline.main [--sets hotpotqa,squad2,scifact] [--judges oracle,oracle-flip10,oracle-flip25]
    .venv/bin/python -m benchmarks.pipeline.main --sets hotpotqa --judges embedded-0.5b --limit 5 --label embedded

Plans (cumulative): fast; +judge (judge <-> expand, answer); +judge+fallback (the `agentic` plan:
validation and the COS-Mix fallback); +conformal, +gmm, +rse (each stage added after the judge,
no validation); full (the `full` plan: +rse with the final answer validated and the fallback);
full-R (full, with the first stage over R and the fallback over S). Judges: `oracle` knows the
gold, `oracle-flipN` flips N % of its verdicts (seeded), the behavioural family of `judges.py` (eager,
strict, primacy, lexicalNN, each also `-noise10`) reads only the prompt, `embedded-0.5b` is the packaged model
(or any endpoint in OPENAI_BASE_URL/OPENAI_MODEL, unchanged). The oracle also reads and validates
(see `data.readers.OracleChat`): its EM/F1 say whether the context holds the answer. `--reader gullible`
(`data.readers.GullibleChat`) reads like a fooled model: it also answers an unanswerable SQuAD 2.0 question
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

from benchmarks.bench_io import commit  # noqa: E402
from benchmarks.pipeline.data.folds import REPO  # noqa: E402
from benchmarks.pipeline.judges import FAMILY  # noqa: E402
from benchmarks.pipeline.plans import COVERAGE_KINDS, OVERRIDES, PLANS  # noqa: E402
from benchmarks.pipeline.rows import merged  # noqa: E402
from benchmarks.pipeline.run import run_dataset  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.tools.index.embedders.device import default_encoder  # noqa: E402
from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="hotpotqa,squad2,scifact")
    ap.add_argument("--judges", default="oracle,oracle-flip10,oracle-flip25")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each set (state n)")
    ap.add_argument("--spread", action="store_true", help="with --limit: N evenly spaced questions, not the first N")
    ap.add_argument("--squad-answerable", type=int, default=200)
    ap.add_argument("--squad-unanswerable", type=int, default=50)
    ap.add_argument(
        "--squad-evaluate",
        default=None,
        metavar="A,U",
        help="evaluate only the first A answerable and U unanswerable questions of the SQuAD sample "
        "(the sample is still drawn, and kept out of calibration, as without it)",
    )
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--reader",
        choices=["oracle", "gullible"],
        default="oracle",
        help="the scripted judges' reader: oracle (answers iff the gold answer is in its context) or "
        "gullible (also answers an unanswerable question with a plausible answer in its context)",
    )
    ap.add_argument("--no-coverage", dest="coverage", action="store_false")
    ap.add_argument(
        "--scifact-calibration",
        choices=["crossfit", "train"],
        default="crossfit",
        help="SciFact calibration questions: the other half of the test claims, or the train claims",
    )
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-pipeline-index"))
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--judge-questions",
        type=int,
        default=60,
        help="combine=auto: calibration questions per fold the judge is measured on (0: not measured)",
    )
    ap.add_argument(
        "--combine",
        default=None,
        choices=["auto", "relevant", "union", "anchored"],
        help="loop.combine for every plan (default: the shipped default)",
    )
    ap.add_argument(
        "--merge",
        action="store_true",
        help="add this run's rows to an existing results file of the same label (other plans or sets)",
    )
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="every plan on a question before the next (paired rows; answerable/unanswerable in turn)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="with --interleave: no new question after this many seconds from the start (n reached is stated)",
    )
    ap.add_argument(
        "--max-errors", type=int, default=3, help="with --interleave: questions whose ask raised before no new question is asked"
    )
    ap.add_argument("--checkpoint", default=None, help="with --interleave: append each row to this JSONL as it is done")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="with --checkpoint: reuse the rows a stopped run wrote there instead of asking those questions again",
    )
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="SECTION.FIELD=JSON",
        help="a config setting for every plan, e.g. segments.keep_evidence=false",
    )
    ap.add_argument(
        "--coverage-kinds",
        default="calibrated,raw",
        help="score kinds whose final-context coverage is measured: calibrated and/or raw",
    )
    args = ap.parse_args(argv)
    OVERRIDES.extend(args.override)
    COVERAGE_KINDS[:] = [None if k.strip() == "calibrated" else k.strip() for k in args.coverage_kinds.split(",") if k.strip()]
    args.judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    args.plans = [p.strip() for p in args.plans.split(",") if p.strip()]
    bad = [p for p in args.plans if p not in PLANS] + [
        j for j in args.judges if j not in ("oracle", "oracle-flip10", "oracle-flip25", "embedded-0.5b", *FAMILY)
    ]
    if bad:
        ap.error(f"unknown plans/judges: {bad}")
    out = REPO / "benchmarks" / "results" / f"pipeline{'-' + args.label if args.label else ''}.json"
    report = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "commit": commit(),
        "load_average": os.getloadavg(),
        "combine": args.combine or Config().loop.combine,
        "overrides": args.override,
        "reader": args.reader,
        "scifact_calibration": args.scifact_calibration,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "defaults": Config().model_dump(include={"loop", "conformal", "outliers", "segments", "fallback", "retrieval"}),
        "sets": {},
    }
    rows: list[dict] = []
    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2", encoder=default_encoder())  # a new index: the shipped default
    started = time.time()
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        run_dataset(name, args, embedder, rows, report)
    report["seconds"] = round(time.time() - started, 1)
    report["load_average_end"] = os.getloadavg()
    if args.merge and out.is_file():
        report, rows = merged(out, report, rows, list(PLANS))
    report["rows"] = [
        {"dataset": d, "judge": k.split("|")[0], "plan": k.split("|")[1], **v}
        for d, s in report["sets"].items()
        for k, v in s["rows"].items()
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (out.with_suffix(".questions.jsonl")).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
