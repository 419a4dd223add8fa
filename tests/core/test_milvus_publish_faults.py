"""Milvus publishes under faults (milvus-lite): a kill -9 mid-publish leaves the previous state readable and the
next publish completes it, a killed full publish leaves no collection, a copied index keeps its own Milvus file,
the process holding the milvus-lite file serves the publish, two publishes take turns (issue 22)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve.tools.index.milvus.client import stop_lite_server  # noqa: E402
from ragsieve.tools.index.milvus.pointer import read_pointer  # noqa: E402
from ragsieve.tools.index.milvus.publish import publish  # noqa: E402
from tests.core.test_stable_rows import builder, snapshot, write_corpus  # noqa: E402
from tests.support.milvus_readers import document_ids, local_snapshot, opened, versions_seen  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


KILL_DURING = textwrap.dedent("""
    import os, signal, sys
    from ragsieve.tools.index.milvus import delta as milvus_delta
    from ragsieve.tools.index.milvus import publish as milvus_publish
    where = sys.argv[2]
    if where == "delta":  # after the old rows are marked and half the new rows are written
        real = milvus_delta.entities
        def entities(*a, **kw):
            out = real(*a, **kw)
            os.kill(os.getpid(), signal.SIGKILL)
        milvus_delta.entities = entities
    else:  # a full publish: the new collection is being filled
        real = milvus_publish._copy
        def copy(client, collection, *a, **kw):
            os.kill(os.getpid(), signal.SIGKILL)
        milvus_publish._copy = copy
    milvus_publish.publish(sys.argv[1], rebuild=where == "full")
""")


def test_kill_9_mid_publish_leaves_the_previous_state_and_the_next_publish_completes_it(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 60, chunks=2)
    builder(index).build([docs])
    publish(index)
    before = versions_seen(index, [f"{p}" for p in document_ids(index)[:4]])
    write_corpus(docs, 60, {0: 7, 1: 7, 2: 7, 3: 7}, chunks=2)
    builder(index).build([docs])
    script = tmp_path / "kill.py"
    script.write_text(KILL_DURING, encoding="utf-8")
    stop_lite_server(str(index / "milvus.db"))  # this process lets go of the file (as a CLI run does at exit)
    out = subprocess.run(
        [sys.executable, str(script), str(index), "delta"], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert out.returncode == -9, out.stderr[-2000:]
    assert versions_seen(index, list(before)) == before  # the previous generation, whole
    with opened(index) as idx:
        assert len(idx.store.get_many(range(len(idx)))) == 120
    done = publish(index)  # the next build finds nothing to build and completes the publish
    last = done["last_publish"]
    assert last["mode"] == "incremental" and last["undone"] + last["restored"] > 0  # the killed one, undone
    assert last["rows_written"] == 8 and last["rows_retired"] == 8  # then this change: 4 documents x 2 chunks
    assert all(marks == {"7", "n=2"} for marks in versions_seen(index, list(before)).values())
    with opened(index) as idx:
        assert snapshot(idx) == local_snapshot(index)


def test_a_killed_full_publish_leaves_no_collection_behind(tmp_path):
    """Issue 22 item 10: the collection a killed publish was filling is dropped by the next publish."""
    from pymilvus import MilvusClient

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 20)
    builder(index).build([docs])
    live = publish(index)["collection"]
    script = tmp_path / "kill.py"
    script.write_text(KILL_DURING, encoding="utf-8")
    stop_lite_server(str(index / "milvus.db"))
    out = subprocess.run([sys.executable, str(script), str(index), "full"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == -9, out.stderr[-2000:]
    abandoned = json.loads((index / "milvus-publishing.json").read_text())["collection"]
    client = MilvusClient(str(index / "milvus.db"))
    try:
        assert client.has_collection(abandoned) and abandoned != live
    finally:
        client.close()
    with opened(index) as idx:  # still the live one
        assert len(idx) == 20
    again = publish(index)
    assert again["collection"] == live
    client = MilvusClient(str(index / "milvus.db"))
    try:
        assert not client.has_collection(abandoned) and client.has_collection(live)
    finally:
        client.close()


def test_a_copied_index_uses_its_own_milvus_file(tmp_path, monkeypatch):
    """Issue 22 item 3: the milvus-lite path is recorded relative to the index folder, not the build's cwd."""
    docs, index = tmp_path / "docs", tmp_path / "a" / "idx"
    write_corpus(docs, 10)
    builder(index).build([docs])
    monkeypatch.chdir(tmp_path / "a")
    publish(Path("idx"))  # a relative index path, built from another folder
    assert read_pointer(index)["uri"] == "milvus.db"
    copy = tmp_path / "b" / "copy"
    shutil.copytree(index, copy)
    monkeypatch.chdir(tmp_path)
    write_corpus(docs, 12)
    builder(copy).build([docs])
    assert publish(copy)["last_publish"]["mode"] == "incremental"
    with opened(copy) as c, opened(index) as original:
        assert len(c) == 12 and len(original) == 10  # the original's file was not touched


def test_publish_goes_through_the_server_of_the_process_holding_the_milvus_lite_file_else_says_why(tmp_path):
    """A milvus-lite file held by another process (a reader, `serve`) is published to through that process's
    loopback server (`<file>.endpoint.json`), which already has the collection open; when that server cannot
    be reached, a clear IndexBusyError after the wait, not a raw traceback (issue 22 item 4)."""
    from ragsieve.tools.index.local.lock import IndexBusyError

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 10)
    builder(index).build([docs])
    publish(index)
    stop_lite_server(str(index / "milvus.db"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from tests.core.test_stable_rows import HashEmbedder
        from ragsieve.tools.index.engines.open import open_index
        idx = open_index({str(index)!r}, embedder=HashEmbedder())
        print("open", flush=True)
        time.sleep(20)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        write_corpus(docs, 11)
        builder(index).build([docs])
        endpoint = index / "milvus.db.endpoint.json"
        assert json.loads(endpoint.read_text())["pid"] == holder.pid
        assert publish(index, lock_wait_s=1.0)["last_publish"]["rows_written"] == 1  # through the holder's server
        endpoint.write_text(json.dumps({"pid": holder.pid, "port": 9}))  # a server that does not answer
        write_corpus(docs, 12)
        builder(index).build([docs])
        with pytest.raises(IndexBusyError, match="open in another process"):
            publish(index, lock_wait_s=1.0)
    finally:
        holder.kill()
        holder.wait()
    assert publish(index)["rows"] == 12  # once the reader is gone, the next publish completes
    with opened(index) as idx:
        assert len(idx) == 12 and snapshot(idx) == local_snapshot(index)


def test_two_publishes_at_once_take_turns(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 10)
    builder(index).build([docs])
    results, errors = [], []

    def run():
        try:
            results.append(publish(index))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=run) for _ in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert not errors and len(results) == 2
    with opened(index) as idx:
        assert len(idx) == 10
