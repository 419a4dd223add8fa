"""ChunkStore round trip and row bookkeeping."""

import pytest

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.types import Chunk


def _chunks(doc_id, n, source="s"):
    return [
        Chunk(
            doc_id=doc_id,
            chunk_index=i,
            text=f"{doc_id} part {i}",
            source=source,
            title=f"T {doc_id}",
            kind="markdown",
            line_start=i * 10 + 1,
            line_end=i * 10 + 9,
        )
        for i in range(n)
    ]


@pytest.fixture()
def store_path(tmp_path):
    path = tmp_path / "chunks.sqlite"
    with ChunkStore(path) as s:
        assert s.add_document("a", "a.md", "h-a", _chunks("a", 3)) == [0, 1, 2]
        assert s.add_document("b", "b.md", "h-b", _chunks("b", 2)) == [3, 4]
        s.add_document("c", "c.md", "h-c", [])
        s.commit()
    return path


def test_round_trip(store_path):
    with ChunkStore(store_path, read_only=True) as s:
        assert s.count() == 5
        assert s.get(3) == _chunks("b", 2)[0]
        assert [c.chunk_id for c in s.get_many([4, 0, 2, 0])] == ["b#1", "a#0", "a#2", "a#0"]
        assert s.row_of("a", 2) == 2 and s.row_of("b", 5) is None
        assert s.texts() == ["a part 0", "a part 1", "a part 2", "b part 0", "b part 1"]
        assert s.documents() == {"a": "h-a", "b": "h-b", "c": "h-c"}
        assert s.doc_rows("b") == [3, 4] and s.doc_rows("c") == []
        assert s.row_of_text("b part 1") == 4 and s.row_of_text("nope") is None
        assert s.chunks_of("a") == _chunks("a", 3)


def test_neighbours_stay_in_the_document(store_path):
    with ChunkStore(store_path, read_only=True) as s:
        assert s.neighbours(1) == [0, 2]
        assert s.neighbours(2) == [1]  # row 3 belongs to document b
        assert s.neighbours(3, radius=5) == [4]
        assert s.neighbours(0, radius=0) == []


def test_read_only_and_errors(store_path, tmp_path):
    with ChunkStore(store_path, read_only=True) as s:
        with pytest.raises(UsageError):
            s.add_document("d", "d", "h", _chunks("d", 1))
        with pytest.raises(UsageError):
            s.get(99)
        with pytest.raises(UsageError):
            s.get_many([1, 99])
    with pytest.raises(IndexMissingError):
        ChunkStore(tmp_path / "missing.sqlite", read_only=True)


def test_primary_key_rejects_duplicate_chunk(tmp_path):
    import sqlite3

    with ChunkStore(tmp_path / "x.sqlite") as s:
        s.add_document("a", "a", "h", _chunks("a", 1))
        with pytest.raises(sqlite3.IntegrityError):
            s.add_document("a", "a", "h", _chunks("a", 1))
