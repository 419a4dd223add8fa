"""A one-document publish on Milvus touches that document's rows only: from a fresh client (the collection
released, as in a new `ragsieve index` process) it never loads, queries or scans the collection, and it writes,
retires and deletes O(k) entities. Checked on a milvus-lite file and on a Milvus server (milvus-lite's own gRPC
server on loopback, the shape of a Milvus standalone): on the server the engine keeps the collection open, so
such a publish costs O(k) whatever the corpus size (`benchmarks/scale_publish_milvus.py` (retired; at its result's commit))."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve.tools.index.milvus import publish as milvus_publish  # noqa: E402
from ragsieve.tools.index.milvus.client import stop_lite_server  # noqa: E402
from ragsieve.tools.index.milvus.publish import INTENT, publish  # noqa: E402
from tests.core.test_stable_rows import builder, snapshot, write_corpus  # noqa: E402
from tests.support.milvus_readers import local_snapshot, opened  # noqa: E402

READS = {"load_collection", "query", "query_iterator", "search", "hybrid_search", "get", "get_collection_stats"}


class Counting:
    """A Milvus client that records each call with the number of entities or ids it carries."""

    def __init__(self, client, calls: list) -> None:
        self._client, self._calls = client, calls

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            data = kwargs.get("data", args[1] if name in ("insert", "upsert") and len(args) > 1 else None)
            ids = kwargs.get("ids")
            self._calls.append(
                (
                    name,
                    len(data) if isinstance(data, list) else None,
                    len(ids) if isinstance(ids, list) else None,
                    kwargs.get("filter"),
                )
            )
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def counted(monkeypatch):
    calls: list = []
    real = milvus_publish.client_for
    monkeypatch.setattr(milvus_publish, "client_for", lambda *a, **kw: Counting(real(*a, **kw), calls))
    return calls


def _change_one(docs, index, n, edit, earlier=()):
    write_corpus(docs, n, {d: d + 1 for d in (*earlier, edit)}, chunks=2)
    builder(index).build([docs])


def _check_one_document(calls, pointer):
    reads = [c for c in calls if c[0] in READS]
    assert reads == [], f"a one-document publish read the collection: {reads}"
    last = pointer["last_publish"]
    assert last["mode"] == "incremental" and last["rows_written"] == 2 and last["rows_retired"] == 2
    assert sum(c[1] for c in calls if c[0] == "insert") == 2  # the document's 2 new entities
    assert sum(c[1] for c in calls if c[0] == "upsert") == 2  # its 2 old ones marked `died`
    deletes = [c for c in calls if c[0] == "delete"]
    assert all(c[3] is None for c in deletes), "a delete by filter scans the collection"
    assert sum(c[2] for c in deletes) <= 2  # the rows the previous change retired, by primary key
    assert not any(c[0] in ("create_collection", "drop_collection") for c in calls)


def test_a_one_document_publish_from_a_fresh_client_reads_nothing_and_writes_its_rows(tmp_path, counted):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 150, chunks=2)
    builder(index).build([docs])
    publish(index)
    for k, edit in enumerate((7, 90)):  # the second one also deletes the rows the first retired
        _change_one(docs, index, 150, edit, earlier=(7, 90)[:k])
        stop_lite_server(str(index / "milvus.db"))  # a fresh engine: the collection released, as in a new process
        counted.clear()
        _check_one_document(counted, publish(index))
    with opened(index) as idx:
        assert snapshot(idx) == local_snapshot(index)


def test_only_an_interrupted_publish_makes_the_next_one_read_the_collection(tmp_path, counted):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40, chunks=2)
    builder(index).build([docs])
    publish(index)
    _change_one(docs, index, 40, 3)
    (index / INTENT).write_text(json.dumps({"mode": "incremental", "collection": "x", "target": "gen-9"}))
    stop_lite_server(str(index / "milvus.db"))
    counted.clear()
    pointer = publish(index)  # the marker says a publish was cut off: its rows are looked for and undone
    assert "load_collection" in [c[0] for c in counted] and pointer["last_publish"]["rows_written"] == 2
    assert not (index / INTENT).exists()
    with opened(index) as idx:
        assert snapshot(idx) == local_snapshot(index)


def test_on_a_milvus_server_a_fresh_client_publishes_one_document_without_reading(tmp_path, counted):
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    server, db, port = start_server_in_thread(data_dir=str(tmp_path / "server-data"), host="127.0.0.1", port=0)
    try:
        docs, index = tmp_path / "docs", tmp_path / "idx"
        write_corpus(docs, 150, chunks=2)
        builder(index).build([docs])
        publish(index, uri=f"http://127.0.0.1:{port}")
        _change_one(docs, index, 150, 42)
        counted.clear()
        _check_one_document(counted, publish(index))  # the pointer keeps the server URI
        with opened(index) as idx:
            assert snapshot(idx) == local_snapshot(index)
    finally:
        server.stop(grace=0)
        db.close()
