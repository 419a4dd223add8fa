"""Issue 10, indexes: one writer at a time, readers never see a half-deleted generation,
damaged files give one clear line. Real builds, real files, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ragsieve.cli.main import main
from ragsieve.tools.errors import IndexMissingError, RagsieveError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.local.lock import IndexBusyError, IndexLock

REPO = Path(__file__).resolve().parents[2]


def corpus(folder: Path, version: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text(f"# Alpha\n\nAlpha rotates keys every {version} days.", encoding="utf-8")
    (folder / "b.txt").write_text("Beta is the billing job that runs nightly.", encoding="utf-8")
    return folder


def test_concurrent_api_builds_all_succeed_and_leave_a_good_index(tmp_path, embedder):
    root = tmp_path / "idx"
    errors: list[BaseException] = []
    reports = []

    def build(i: int) -> None:
        try:
            reports.append(
                IndexBuilder(root, embedder=embedder, progress=False).build([corpus(tmp_path / f"c{i}", i)], sync=True)
            )
        except BaseException as exc:  # noqa: BLE001 - the test counts every failure
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == [] and len(reports) == 4
    assert sorted(r.generation for r in reports) == ["gen-1", "gen-2", "gen-3", "gen-4"]  # strictly one after another
    with HybridIndex.open(root) as index:
        assert len(index) == 2
    assert len([p for p in root.iterdir() if p.name.startswith("gen-")]) == 2  # live + the one it replaced


def test_second_writer_waits_or_is_refused_with_a_clear_error(tmp_path, embedder):
    root = tmp_path / "idx"
    with IndexLock(root):
        started = time.monotonic()
        with pytest.raises(IndexBusyError, match=r"being written by another build \(pid \d+"):
            IndexBuilder(root, embedder=embedder, progress=False, lock_wait_s=0.3).build([corpus(tmp_path / "c", 1)])
        assert time.monotonic() - started >= 0.3
        with pytest.raises(IndexBusyError, match="lock wait 0s"):
            IndexBuilder(root, embedder=embedder, progress=False, lock_wait_s=0).build([corpus(tmp_path / "c", 1)])
    assert not (root / "CURRENT").exists()  # nothing was written by the refused builds

    holder = IndexLock(root)
    holder.acquire()
    threading.Timer(0.5, holder.release).start()
    report = IndexBuilder(root, embedder=embedder, progress=False, lock_wait_s=30).build([corpus(tmp_path / "c", 1)])
    assert report.written  # waited for the lock, then built
    with pytest.raises(RagsieveError, match="lock timeout must be >= 0"):
        IndexBuilder(root, embedder=embedder, lock_wait_s=-1)


def test_reader_reopening_during_builds_never_fails(tmp_path, embedder):
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=embedder, progress=False).build([corpus(tmp_path / "c0", 0)])
    done = threading.Event()
    failures: list[str] = []
    opens = 0

    def read() -> None:
        nonlocal opens
        while not done.is_set():
            try:
                with HybridIndex.open(root) as index:
                    assert len(index.store.texts()) == 2
                opens += 1
            except BaseException as exc:  # noqa: BLE001
                failures.append(f"{type(exc).__name__}: {exc}")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(1, 7):
            IndexBuilder(root, embedder=embedder, progress=False).build([corpus(tmp_path / f"c{i}", i)], sync=True)
    finally:
        done.set()
        reader.join(timeout=60)
    assert failures == [] and opens > 0


def test_two_cli_builds_at_once_both_succeed(tmp_path):
    root = tmp_path / "idx"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragsieve",
                "index",
                str(corpus(tmp_path / f"c{i}", i)),
                "--sync",
                "--index",
                str(root),
                "--no-progress",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(o[0].split("wrote ")[1].split(":")[0] for o in outs) == ["gen-1", "gen-2"]
    with HybridIndex.open(root) as index:
        assert len(index) == 2


def _damage(gen: Path, kind: str) -> None:
    root = gen.parent
    actions = {
        "CURRENT garbage": lambda: (root / "CURRENT").write_bytes(b"\xff\xfe../../etc"),
        "CURRENT dangling": lambda: (root / "CURRENT").write_text("gen-99\n"),
        "manifest not JSON": lambda: (gen / "manifest.json").write_text("{not json"),
        "manifest wrong shape": lambda: (gen / "manifest.json").write_text("[1, 2]"),
        "chunks.sqlite garbage": lambda: (gen / "chunks.sqlite").write_bytes(b"garbage" * 100),
        "chunks.sqlite truncated": lambda: (gen / "chunks.sqlite").write_bytes((gen / "chunks.sqlite").read_bytes()[:100]),
        "dense.faiss garbage": lambda: (gen / "dense.faiss").write_bytes(b"\x00garbage" * 10),
        "vectors.npy truncated": lambda: (gen / "vectors.npy").write_bytes((gen / "vectors.npy").read_bytes()[:90]),
        "vectors.npy wrong rows": lambda: np.save(gen / "vectors.npy", np.zeros((7, 384), dtype=np.float32)),
        "sparse.json garbage": lambda: (gen / "sparse.json").write_text('{"rows": "x"}'),
        "sparse.json out of range": lambda: (gen / "sparse.json").write_text('{"rows": [999]}'),
        "bm25 params garbage": lambda: [p.write_bytes(b"garbage") for p in (gen / "bm25").iterdir()],
    }
    actions[kind]()


DAMAGE = [
    "CURRENT garbage",
    "CURRENT dangling",
    "manifest not JSON",
    "manifest wrong shape",
    "chunks.sqlite garbage",
    "chunks.sqlite truncated",
    "dense.faiss garbage",
    "vectors.npy truncated",
    "vectors.npy wrong rows",
    "sparse.json garbage",
    "sparse.json out of range",
    "bm25 params garbage",
]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_index_gives_one_clear_line(tmp_path, embedder, kind, capsys):
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=embedder, progress=False, segments=False).build([corpus(tmp_path / "c", 1)])
    _damage(root / "gen-1", kind)  # the whole-generation layout (format 1); the incremental one: test_incremental
    with pytest.raises(IndexMissingError) as caught:
        HybridIndex.open(root)
    message = str(caught.value)
    assert "\n" not in message and str(root) in message
    assert main(["ask", "what rotates?", "--index", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ragsieve: error: ") and "\n" not in err and "Traceback" not in err
    json.dumps(err)  # printable
