"""Incremental publishes on Milvus (milvus-lite) beside the local backend: O(k) rows per change, readers see each
document all old or all new, a kill -9 mid-publish leaves the previous state readable and the next publish
completes it; and the hostile re-run's Milvus findings (issue 22: items 1, 3, 4, 10)."""
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

from test_stable_rows import HashEmbedder, builder, snapshot, write_corpus  # noqa: E402

from ragsieve.tools.index.local.index import HybridIndex  # noqa: E402
from ragsieve.tools.index.milvus.client import stop_lite_server  # noqa: E402
from ragsieve.tools.index.milvus.pointer import read_pointer  # noqa: E402
from ragsieve.tools.index.milvus.publish import publish  # noqa: E402
from ragsieve.tools.index.open import open_index  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def opened(index):
    return open_index(index, embedder=HashEmbedder())


def local_snapshot(index):
    with HybridIndex.open(index, embedder=HashEmbedder()) as local:
        return snapshot(local)


def versions_seen(index, doc_ids) -> dict[str, set[str]]:
    """Per document, the `version N` marks of its chunks as one reader sees them."""
    with opened(index) as idx:
        out = {}
        for doc in doc_ids:
            chunks = idx.store.chunks_of(doc)
            out[doc] = {c.text.split("version ")[1].split(".")[0] for c in chunks} | {f"n={len(chunks)}"}
        return out


def test_change_one_document_of_500_writes_and_retires_only_its_rows(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 500)
    builder(index).build([docs])
    first = publish(index)
    assert first["last_publish"]["mode"] == "full" and first["rows"] == 500
    with opened(index) as idx:
        rows = idx.store.doc_rows(next(d for d in idx.store.documents() if "doc0250" in d))
    write_corpus(docs, 500, {250: 1})
    builder(index).build([docs])
    second = publish(index)
    last = second["last_publish"]
    assert second["collection"] == first["collection"] and last["mode"] == "incremental"
    assert last["rows_written"] == len(rows) and last["rows_retired"] == len(rows)
    with opened(index) as idx:
        assert snapshot(idx) == local_snapshot(index)  # the same rows, chunks and vectors as the local index
    # removing documents shrinks the rows: the tail moves into the holes, still O(k)
    for i in (10, 20, 30):
        (docs / f"doc{i:04d}.md").unlink()
    builder(index).build([docs])
    third = publish(index)["last_publish"]
    assert third["mode"] == "incremental" and third["rows_written"] <= 3 and third["rows_retired"] <= 6
    with opened(index) as idx:
        assert len(idx) == 497 and snapshot(idx) == local_snapshot(index)
    # unchanged: publishing the generation already shown writes nothing and drops nothing (issue 22 item 1)
    again = publish(index)
    assert again["collection"] == first["collection"] and again["last_publish"]["rows_written"] == 0
    with opened(index) as idx:
        assert len(idx) == 497 and len(idx.store.get_many(range(497))) == 497


@pytest.mark.parametrize("backend", ["local", "milvus"])
def test_a_reader_in_a_loop_sees_each_document_all_old_or_all_new(tmp_path, backend):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40, chunks=3)
    builder(index).build([docs])
    if backend == "milvus":
        publish(index)
    with opened(index) as idx:
        watched = sorted(idx.store.documents())[:6]
    seen, stop, errors = [], threading.Event(), []

    def read():
        while not stop.is_set():
            try:
                seen.append(versions_seen(index, watched))
            except Exception as exc:  # a reader must never fail either
                errors.append(f"{type(exc).__name__}: {exc}"[:300])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for step in range(1, 21):  # 20 incremental publishes, each changing two of the watched documents
            write_corpus(docs, 40, {(2 * step) % 6: step, (2 * step + 1) % 6: step}, chunks=3)
            builder(index).build([docs])
            if backend == "milvus":
                assert publish(index)["last_publish"]["mode"] == "incremental"
    finally:
        stop.set()
        reader.join(timeout=60)
    assert not errors, errors[:3]
    assert len(seen) >= 5
    for view in seen:
        for doc, marks in view.items():
            assert marks & {"n=3"} and len(marks) == 2, (doc, marks)  # 3 chunks, one version


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
    before = versions_seen(index, [f"{p}" for p in _ids(index)[:4]])
    write_corpus(docs, 60, {0: 7, 1: 7, 2: 7, 3: 7}, chunks=2)
    builder(index).build([docs])
    script = tmp_path / "kill.py"
    script.write_text(KILL_DURING, encoding="utf-8")
    stop_lite_server(str(index / "milvus.db"))  # this process lets go of the file (as a CLI run does at exit)
    out = subprocess.run([sys.executable, str(script), str(index), "delta"], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
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
    out = subprocess.run([sys.executable, str(script), str(index), "full"], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
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
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_stable_rows import HashEmbedder
        from ragsieve.tools.index.open import open_index
        idx = open_index({str(index)!r}, embedder=HashEmbedder())
        print("open", flush=True)
        time.sleep(20)
    """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
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


def _ids(index) -> list[str]:
    with opened(index) as idx:
        return sorted(idx.store.documents())


def test_the_trace_counts_round_trips_to_milvus_and_fused_retrieval_is_one(tmp_path):
    """Issue 28 item 4: RRF fusion runs server-side (one hybrid_search), and each traced step says how many
    requests it sent to the engine."""
    from ragsieve import Config, Orchestrator
    from ragsieve.agent.llm.fake import FakeChat

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 12)
    builder(index).build([docs])
    publish(index)
    with Orchestrator.open(index, Config(), chat=FakeChat(default="Part 0 [1].")) as orch:
        orch.index._embedder = HashEmbedder()
        answer = orch.ask("Document 3 part 0")
    retrieve = next(e for e in answer.trace if e.step == "retrieve")
    assert retrieve.summary["index_round_trips"] >= 1
    calls = []
    with opened(index) as idx:
        real = idx.client._client.hybrid_search
        idx.client._client.hybrid_search = lambda *a, **kw: calls.append(1) or real(*a, **kw)
        from ragsieve.tools.index.query.retriever import HybridRetriever

        before = idx.round_trips()
        hits = HybridRetriever(idx).run("Document 3 part 0", top_k=5)
        assert hits and calls == [1] and idx.round_trips() - before == 1  # one request for the fused ranking


def test_a_row_missing_from_the_collection_is_a_usage_error_naming_it(tmp_path):
    """The Milvus store's missing-row error is raised as UsageError (the split into milvus_store.py had left it
    unimported: a NameError instead of the message)."""
    from ragsieve.tools.errors import UsageError
    from ragsieve.tools.index.milvus.store import MilvusStore

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 5)
    builder(index).build([docs])
    publish(index)
    with opened(index) as served:
        assert isinstance(served.store, MilvusStore)
        n = len(served)
        assert served.store.get_many([0])[0].text  # a present row reads back
        with pytest.raises(UsageError, match=rf"rows \[{n + 7}\] not in the Milvus collection"):
            served.store.get_many([0, n + 7])
