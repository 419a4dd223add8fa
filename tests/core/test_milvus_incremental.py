"""Incremental publishes on Milvus (milvus-lite) beside the local backend: O(k) rows per change, readers see each
document all old or all new, the round trips a query makes, a row missing from the collection (issue 22; the
publish faults are in `test_milvus_publish_faults.py`)."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve.tools.index.milvus.publish import publish  # noqa: E402
from tests.core.test_stable_rows import HashEmbedder, builder, snapshot, write_corpus  # noqa: E402
from tests.support.milvus_readers import local_snapshot, opened, versions_seen  # noqa: E402


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


def test_the_trace_counts_round_trips_to_milvus_and_fused_retrieval_is_one(tmp_path):
    """Issue 28 item 4: RRF fusion runs server-side (one hybrid_search), and each traced step says how many
    requests it sent to the engine."""
    from ragsieve import Config, Orchestrator
    from ragsieve.testing import FakeChat

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
