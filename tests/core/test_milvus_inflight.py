"""Milvus in-flight protection (issue 25 item 3 for Milvus, issue 28): a reader holding generation G keeps
seeing G whole while later publishes retire its rows (they are not deleted) and while `--rebuild` replaces the
collection (it is not dropped); once the reader lets go, the next publish deletes / drops them. The reader may
be another process (a lease is a file lock): a killed reader's lease goes with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve.tools.index.milvus.client import client_for, release_client  # noqa: E402
from ragsieve.tools.index.milvus.leases import held  # noqa: E402
from ragsieve.tools.index.milvus.pointer import read_pointer  # noqa: E402
from ragsieve.tools.index.milvus.publish import publish  # noqa: E402
from tests.core.test_stable_rows import builder, snapshot, write_corpus  # noqa: E402
from tests.support.milvus_readers import opened, versions_seen  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def entities(index: Path, collection: str) -> int:
    """Every entity of `collection`, visible or not."""
    uri = str(index / "milvus.db")
    client = client_for(uri)
    try:
        if not client.has_collection(collection):
            return -1
        found = client.query(collection, filter="row >= 0", output_fields=["count(*)"])
        return int(found[0]["count(*)"])
    finally:
        release_client(client, uri)


def change(docs: Path, index: Path, version: int, n: int = 40) -> dict:
    write_corpus(docs, n, {5: version})
    builder(index).build([docs])
    return publish(index)


def test_a_reader_keeps_its_generation_through_publishes_and_a_rebuild(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40)
    builder(index).build([docs])
    first = publish(index)
    reader = opened(index)  # a question in flight on generation 1
    try:
        before = snapshot(reader)
        assert held(index) == [(first["collection"], first["visible"])]
        change(docs, index, 1)  # generation 2 retires document 5's row (died = 2)
        third = change(docs, index, 2)  # generation 3 would delete it: the reader still shows it
        assert third["pending_expiry"] and third["last_publish"]["expired"] == 0
        assert snapshot(reader) == before  # all old, nothing missing
        assert entities(index, first["collection"]) == 40 + 2
        rebuilt = publish(index, rebuild=True)
        assert rebuilt["collection"] != first["collection"] and rebuilt["pending_drop"] == [first["collection"]]
        assert entities(index, first["collection"]) == 42  # not dropped under the reader
        assert snapshot(reader) == before
    finally:
        reader.close()
    assert held(index) == []
    fourth = change(docs, index, 3)  # nobody reads the old collection now: dropped
    assert fourth["pending_drop"] == [] and entities(index, first["collection"]) == -1
    with opened(index) as now:
        assert versions_seen(index, [d for d in now.store.documents() if "doc0005" in d]).popitem()[1] == {"3", "n=1"}


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ragsieve.tools.index.milvus.leases import hold
    from ragsieve.tools.index.milvus.pointer import read_pointer
    root = Path(sys.argv[1])
    pointer, lease = hold(root, lambda: read_pointer(root))
    print(pointer["visible"], lease is not None and lease.held, flush=True)
    time.sleep(120)  # killed by the test long before
""")


def test_a_lease_held_by_another_process_keeps_rows_until_it_dies(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40)
    builder(index).build([docs])
    first = publish(index)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(index)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().split() == [str(first["visible"]), "True"]
        change(docs, index, 1)
        kept = change(docs, index, 2)
        assert kept["last_publish"]["expired"] == 0 and len(kept["pending_expiry"]) == 1  # (died = 2)
        assert entities(index, first["collection"]) == 42  # generation 1's row of document 5 is still there
    finally:
        holder.kill()  # kill -9: the kernel drops its lock
        holder.wait(timeout=30)
    done = change(docs, index, 3)
    assert done["last_publish"]["expired"] == 2 and done["pending_expiry"] == []
    assert entities(index, first["collection"]) == 41  # live 40 + the row retired by this publish
    assert read_pointer(index)["visible"] == done["visible"]


def test_an_incremental_publish_does_not_read_the_collection(tmp_path, monkeypatch):
    """The retired rows' entities are rebuilt from the previous local generation and the recorded `born`
    (`milvus.born`): no query, no collection load (O(corpus) on milvus-lite in a new process)."""
    from ragsieve.tools.index.milvus import delta as milvus_delta

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40)
    builder(index).build([docs])
    first = publish(index)
    assert first["copy_generation"] == first["visible"]
    reads = []
    monkeypatch.setattr(milvus_delta, "_query_all", lambda *a, **k: reads.append(a) or [])
    for version in (1, 2, 3):  # the same document three times: its `born` moves on each time
        now = change(docs, index, version)
        assert now["last_publish"]["rows_written"] == now["last_publish"]["rows_retired"] == 1
    assert reads == [] and now["born_file"]
    with opened(index) as idx:
        assert len(idx) == 40
        assert versions_seen(index, [d for d in idx.store.documents() if "doc0005" in d]).popitem()[1] == {"3", "n=1"}
    assert entities(index, first["collection"]) == 41  # 40 live + the row retired last (deleted next time)


def test_a_pointer_from_before_the_born_record_is_looked_up_once_then_never(tmp_path, monkeypatch):
    """An index published before `copy_generation` / `born_file` existed: its next publish looks the retired rows
    up (the query path) and reads the born record from the collection once; the publishes after it read
    nothing, and still retire the right entity of a document changed before the record existed."""
    import json

    from ragsieve.tools.index.milvus import born as milvus_born
    from ragsieve.tools.index.milvus import delta as milvus_delta

    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 40)
    builder(index).build([docs])
    first = publish(index)
    change(docs, index, 1)  # document 5's row now lives in a later generation than the full copy
    legacy = read_pointer(index)
    for key in ("copy_generation", "born_file"):
        legacy.pop(key)
    (index / "milvus.json").write_text(json.dumps(legacy), encoding="utf-8")

    reads, migrations = [], []
    real_query, real_born = milvus_delta._query_all, milvus_born.born_from_collection
    monkeypatch.setattr(milvus_delta, "_query_all", lambda *a, **k: reads.append(a[2]) or real_query(*a, **k))
    monkeypatch.setattr(milvus_born, "born_from_collection", lambda *a: migrations.append(a[2]) or real_born(*a))
    migrated = change(docs, index, 2)
    assert len(reads) == 1 and len(migrations) == 1  # looked up, then the record read from the collection
    assert migrated["copy_generation"] == first["visible"]
    born = milvus_born.read_born(index, migrated)
    assert born == {r: migrated["visible"] for r in born} and len(born) == 1  # only document 5's row is newer
    for version in (3, 4):
        now = change(docs, index, version)
        assert now["last_publish"]["rows_written"] == now["last_publish"]["rows_retired"] == 1
    assert len(reads) == 1 and len(migrations) == 1  # nothing read after the migration
    with opened(index) as idx:
        assert len(idx) == 40
        assert versions_seen(index, [d for d in idx.store.documents() if "doc0005" in d]).popitem()[1] == {"4", "n=1"}
    assert entities(index, first["collection"]) == 41  # 40 live + the row retired last
