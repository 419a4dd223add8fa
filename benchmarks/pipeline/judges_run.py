"""The judge family (`judges.py`) against today's code and a baseline tree, in one run, with its promise tests.

    git worktree add --detach /tmp/trust-base 6c61403 && bash /work/helpers/mkvenv.sh /tmp/trust-base
    nice -n 10 .venv/bin/python -m benchmarks.pipeline.judges_run --baseline /tmp/trust-base --index-root /tmp/trust/idx

For each code (this checkout, and `--baseline`: its own venv's `ragsieve` running this checkout's benchmark
code), one worker process runs `fast` and `full` on every question of every set for every judge (the pipeline
benchmark's `run_dataset`, each judge measured on calibration first, as `ragsieve calibrate --judge N` does).
Readers: SQuAD 2.0 the gullible one (it answers an unanswerable question when a plausible answer is in its
context), the others the oracle reader. Rows are paired by (set, judge, plan, question) across the codes and
between plans; `judges_stats.promises` turns them into the `promises` list of the result. Writes
benchmarks/results/judges[-LABEL].json and its rows (.jsonl.gz).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from benchmarks import bench_io  # noqa: E402
from benchmarks.pipeline.judges import FAMILY  # noqa: E402
from benchmarks.pipeline.judges_stats import cost_rows, promises, summary_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MEASURES = [
    "agent",
    "tools/filters",
    "prompts",
    "benchmarks/pipeline/judges.py",
    "benchmarks/pipeline/judges_run.py",
    "benchmarks/pipeline/judges_stats.py",
    "benchmarks/pipeline/run.py",
    "benchmarks/pipeline/data",
]


def worker_args(args, name: str) -> Namespace:
    """The pipeline benchmark's options for one set (`pipeline_run.run_dataset`)."""
    n_ans, n_una = (int(x) for x in args.squad.split(","))
    return Namespace(
        squad_answerable=n_ans,
        squad_unanswerable=n_una,
        squad_evaluate=args.squad_evaluate,
        seed=13,
        scifact_calibration="crossfit",
        limit=None,
        spread=False,
        index_root=args.index_root,
        judges=args.judges,
        plans=["fast", "full"],
        interleave=False,
        combine=None,
        judge_questions=args.judge_questions,
        timeout=900.0,
        reader="gullible" if name == "squad2" else "oracle",
        coverage=False,
        budget_s=None,
        max_errors=3,
        checkpoint=None,
        resume=False,
    )


def work(args) -> int:
    """One code's rows: run in the interpreter whose `ragsieve` is measured."""
    from benchmarks.pipeline.run import run_dataset
    from ragsieve.tools.index.embedders.device import default_encoder
    from ragsieve.tools.index.embedders.local_embedder import Embedder

    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2", encoder=default_encoder())
    rows: list[dict] = []
    report: dict = {"sets": {}, "commit": args.code_commit}
    started = time.time()
    for name in args.sets:
        run_dataset(name, worker_args(args, name), embedder, rows, report)
    for info in report["sets"].values():
        info.pop("rows", None)  # the summaries are recomputed from the paired rows
    Path(args.out).write_text(
        json.dumps({"rows": rows, "report": report, "seconds": round(time.time() - started, 1)}, default=str), encoding="utf-8"
    )
    return 0


def commit_of(tree: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or "unknown"


def spawn(python: str, args, index_root: str, out: Path, code_commit: str) -> dict:
    cmd = [
        python,
        "-m",
        "benchmarks.pipeline.judges_run",
        "--worker",
        "--out",
        str(out),
        "--sets",
        ",".join(args.sets),
        "--judges",
        ",".join(args.judges),
        "--squad",
        args.squad,
        "--judge-questions",
        str(args.judge_questions),
        "--index-root",
        index_root,
        "--code-commit",
        code_commit,
    ] + (["--squad-evaluate", args.squad_evaluate] if args.squad_evaluate else [])
    print("running:", " ".join(cmd), flush=True)
    # this checkout's benchmark code and the interpreter's `ragsieve`: from a folder holding only a link to
    # benchmarks/, so a baseline interpreter does not import this checkout's `ragsieve/` from the working directory
    home = out.parent / "code"
    home.mkdir(exist_ok=True)
    if not (home / "benchmarks").exists():
        (home / "benchmarks").symlink_to(REPO / "benchmarks", target_is_directory=True)
    subprocess.run(cmd, check=True, cwd=home)
    return json.loads(out.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="hotpotqa,squad2,scifact")
    ap.add_argument("--judges", default=",".join(["oracle", *FAMILY]))
    ap.add_argument(
        "--squad",
        default="300,300",
        metavar="A,U",
        help="SQuAD 2.0 answerable,unanswerable questions evaluated (drawn from qa.jsonl, kept out of calibration)",
    )
    ap.add_argument(
        "--squad-evaluate",
        default=None,
        metavar="A,U",
        help="evaluate the first A answerable and U unanswerable of the SQuAD sample (it is still drawn and "
        "kept out of calibration)",
    )
    ap.add_argument("--judge-questions", type=int, default=60)
    ap.add_argument("--baseline", default=None, help="a checkout of the baseline commit with its own .venv")
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-pipeline-index"))
    ap.add_argument("--label", default="")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--code-commit", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.sets = [s for s in args.sets.split(",") if s]
    args.judges = [j for j in args.judges.split(",") if j]
    if args.worker:
        return work(args)
    head = bench_io.header(measures=MEASURES)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="rs-judges-") as tmp:
        current = spawn(sys.executable, args, args.index_root, Path(tmp) / "current.json", head["commit"])
        baseline = None
        if args.baseline:
            tree = Path(args.baseline).resolve()
            # the same index and calibrated copies (the calibration code is the baseline's too); each worker measures
            # every judge again before its plans, so the baseline reads its own measurement
            baseline = spawn(
                str(tree / ".venv" / "bin" / "python"), args, args.index_root, Path(tmp) / "baseline.json", commit_of(tree)
            )
    rows = [r | {"code": "current"} for r in current["rows"]]
    rows += [r | {"code": "baseline"} for r in (baseline or {}).get("rows", [])]
    result = {
        **head,
        "baseline": None if baseline is None else {"tree": args.baseline, "commit": baseline["report"]["commit"]},
        "judges": args.judges,
        "sets": args.sets,
        "squad": args.squad,
        "squad_evaluate": args.squad_evaluate,
        "judge_questions": args.judge_questions,
        "readers": {s: worker_args(args, s).reader for s in args.sets},
        "calibration": {"current": current["report"]["sets"], "baseline": (baseline or {}).get("report", {}).get("sets")},
        "seconds": round(time.time() - started, 1),
        "summary": summary_rows(rows),
        "cost": cost_rows(rows),
        "promises": promises(rows),
    }
    out = REPO / "benchmarks" / "results" / f"judges{'-' + args.label if args.label else ''}.json"
    result["rows_file"] = bench_io.write_rows(rows, out.with_suffix(".jsonl.gz")).name
    return bench_io.write(result, out)


if __name__ == "__main__":
    sys.exit(main())
