"""Issue 10 reliability figures -> benchmarks/results/reliability.json.

    nice -n 10 .venv/bin/python -m benchmarks.pipeline.reliability [--builds 60] [--cli-pairs 2] [--out FILE]

Three parts, all on real files and real processes:
- cases: the issue's hostile cases, as the pytest files that encode them (walk faults,
  index concurrency and damage, LLM faults on a loopback stub), counted tried/passed;
- concurrent build/read trials in one process: two builder threads rebuild one index
  with changing content (`--builds` in all; each build syncs the index to its own two-file
  folder, so every complete generation holds exactly two chunks: a build adds to an index
  by default, and a reader counting chunks would otherwise see earlier folders kept) while a reader thread re-opens it in a
  loop; every build and every open is a trial, every exception a failure;
- control (`--control-builds N`): the same in-process trials with the write lock
  patched out, to show that the trials do detect what the lock prevents;
- concurrent CLI builds: `--cli-pairs` pairs of `ragsieve index` processes started
  together on one index; a trial fails if either exits non-zero or the index does not open.
The embedder is shared by the in-process trials; corpora are two small files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from benchmarks import bench_io  # noqa: E402

CASE_FILES = [
    "tests/core/test_walk_faults.py",
    "tests/core/test_index_concurrency.py",
    "tests/core/test_llm_faults.py",
    "tests/core/test_cli_limits.py",
]


def corpus(folder: Path, version: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text(f"# Alpha\n\nAlpha rotates keys every {version} days.", encoding="utf-8")
    (folder / "b.txt").write_text("Beta is the billing job that runs nightly.", encoding="utf-8")
    return folder


def run_cases(work: Path) -> dict:
    report = work / "cases.xml"
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *CASE_FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tried = int(suite.get("tests", 0)) - int(suite.get("skipped", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    names = [
        f"{c.get('classname')}::{c.get('name')}"
        for c in suite.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    return {
        "files": CASE_FILES,
        "tried": tried,
        "passed": tried - failed,
        "failed": names,
        "seconds": round(time.monotonic() - started, 1),
    }


class _NoLock:
    """The control: builds without the write lock, to show the trials can see failures."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def run_inprocess(work: Path, builds: int, lock: bool = True) -> dict:
    import ragsieve.tools.index.building.builder as builder_module
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.embedders.local_embedder import Embedder
    from ragsieve.tools.index.local.index import HybridIndex

    real_lock = builder_module.IndexLock
    if not lock:
        builder_module.IndexLock = _NoLock
    try:
        return _inprocess(work, builds, IndexBuilder, HybridIndex, Embedder)
    finally:
        builder_module.IndexLock = real_lock


def _inprocess(work: Path, builds: int, IndexBuilder, HybridIndex, Embedder) -> dict:  # noqa: N803
    embedder = _embedder(Embedder)
    root = work / "idx"
    if root.exists():
        import shutil

        shutil.rmtree(root)
    IndexBuilder(root, embedder=embedder, progress=False).build([corpus(work / "c0", 0)])
    failures: list[str] = []
    counts = {"builds": 0, "opens": 0}
    lock = threading.Lock()
    done = threading.Event()

    def builder(offset: int) -> None:
        for i in range(builds // 2):
            try:
                IndexBuilder(root, embedder=embedder, progress=False, lock_wait_s=120).build(
                    [corpus(work / f"c{offset}-{i}", offset * 1000 + i)], sync=True
                )  # the index = this corpus
                with lock:
                    counts["builds"] += 1
            except BaseException as exc:  # noqa: BLE001 - every failure is counted
                failures.append(f"build: {type(exc).__name__}: {exc}")

    def reader() -> None:
        while not done.is_set():
            try:
                with HybridIndex.open(root) as index:
                    if len(index.store.texts()) != 2:
                        raise AssertionError("wrong chunk count")
                with lock:
                    counts["opens"] += 1
            except BaseException as exc:  # noqa: BLE001
                failures.append(f"open: {type(exc).__name__}: {exc}")

    started = time.monotonic()
    threads = [threading.Thread(target=builder, args=(k,)) for k in (1, 2)]
    read_thread = threading.Thread(target=reader)
    read_thread.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    read_thread.join()
    return {
        "build_trials": counts["builds"] + sum(f.startswith("build") for f in failures),
        "read_trials": counts["opens"] + sum(f.startswith("open") for f in failures),
        "trials": counts["builds"] + counts["opens"] + len(failures),
        "failures": len(failures),
        "failure_examples": failures[:5],
        "seconds": round(time.monotonic() - started, 1),
    }


_EMBEDDER = []


def _embedder(Embedder):  # noqa: N803 - one model for every in-process trial
    if not _EMBEDDER:
        _EMBEDDER.append(Embedder("sentence-transformers/all-MiniLM-L6-v2"))
    return _EMBEDDER[0]


def run_cli(work: Path, pairs: int) -> dict:
    from ragsieve.tools.index.local.index import HybridIndex

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    failures: list[str] = []
    started = time.monotonic()
    for pair in range(pairs):
        root = work / f"cli-idx-{pair}"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ragsieve",
                    "index",
                    str(corpus(work / f"cli-{pair}-{k}", k)),
                    "--index",
                    str(root),
                    "--no-progress",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for k in range(2)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=900)
            if proc.returncode != 0:
                failures.append(f"rc {proc.returncode}: {err.strip()[-300:]}")
        try:
            HybridIndex.open(root).close()
        except Exception as exc:  # noqa: BLE001
            failures.append(f"open after: {exc}")
    return {
        "pairs": pairs,
        "trials": 2 * pairs,
        "failures": len(failures),
        "failure_examples": failures[:5],
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--builds", type=int, default=60)
    parser.add_argument("--cli-pairs", type=int, default=2)
    parser.add_argument("--skip-cases", action="store_true")
    parser.add_argument(
        "--control-builds", type=int, default=0, help="also run this many builds WITHOUT the lock (control: should show failures)"
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "reliability.json"))
    args = parser.parse_args(argv)
    run = bench_io.header()  # command, commit, machine and load average, before the work starts
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="rs-reliability-") as tmp:
        work = Path(tmp)
        cases = None if args.skip_cases else run_cases(work)
        inproc = run_inprocess(work, args.builds)
        cli = run_cli(work, args.cli_pairs)
        control = run_inprocess(work, args.control_builds, lock=False) if args.control_builds else None
    trials = inproc["trials"] + cli["trials"]
    result = {
        **run,
        "cases": cases,
        "concurrent_inprocess": inproc,
        "concurrent_cli": cli,
        "control_without_lock": control,
        "concurrency_trials": trials,
        "concurrency_failures": inproc["failures"] + cli["failures"],
        "target": "0 failures in >= 100 concurrent build/read trials",
        "load_average_at_end": os.getloadavg(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(
        json.dumps(
            {k: result[k] for k in ("concurrency_trials", "concurrency_failures")}
            | {"cases": cases and {k: cases[k] for k in ("tried", "passed")}}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
