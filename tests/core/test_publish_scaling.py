"""A one-document publish of the local incremental layout reads O(changed documents) from the previous
generation: no listing of its documents, no count of its rows, no fingerprint over the whole corpus
(`ragsieve.tools.index.building.change_plan`); what it reports and fingerprints is still what a full build gives."""

from __future__ import annotations

import json
import sqlite3

import pytest

import ragsieve.tools.index.building.builder as builder_module
import ragsieve.tools.index.building.change_plan as change_plan
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.report import in_scope
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.store import ChunkStore
from tests.core.test_incremental import HashEmbedder, _write

N = 300


def _build(root, paths, **kw):
    return IndexBuilder(root, embedder=HashEmbedder(), progress=False).build(paths, **kw)


@pytest.fixture
def corpus(tmp_path):
    docs = tmp_path / "docs"
    _write(docs, N)
    _build(tmp_path / "index", [docs])
    return docs, tmp_path / "index"


def _forbid_listing(monkeypatch) -> list[str]:
    """Make every O(corpus) read of the previous generation fail, and record the SQL the publish runs."""

    def refuse(*_a, **_k):
        raise AssertionError("a one-document publish listed the whole previous generation")

    for name in ("documents", "document_rows", "texts", "row_metadata", "symbol_chunks"):
        monkeypatch.setattr(ChunkStore, name, refuse)
    monkeypatch.setattr(builder_module, "listed_change", refuse)
    monkeypatch.setattr(change_plan, "fingerprint_of", refuse)
    statements: list[str] = []
    real_connect = sqlite3.connect

    def connect(*a, **k):
        db = real_connect(*a, **k)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", connect)
    return statements


def _full_scans(statements: list[str]) -> list[str]:
    """Statements that read every visible row of a table: a count or a `WHERE 1 AND born ...` listing."""
    return [s for s in statements if "COUNT(*)" in s or ("WHERE 1 AND" in s and not s.endswith("LIMIT 1"))]


def test_one_document_publish_reads_only_that_document(corpus, monkeypatch):
    docs, root = corpus
    (docs / "d00007.md").write_text("an edited note about w1 and w2\n")
    statements = _forbid_listing(monkeypatch)
    report = _build(root, [docs / "d00007.md"])
    assert (report.docs_updated, report.docs_added, report.docs_removed, report.docs_kept) == (1, 0, 0, N - 1)
    assert report.chunks_embedded == 1 and _full_scans(statements) == []
    manifest = read_manifest(current_generation(root))
    assert (
        manifest["counts"]["documents"] == N
        and json.loads((current_generation(root) / "changes.json").read_text())["changed"] != []
    )


def test_a_sequence_of_changes_keeps_the_fingerprint_and_counts_of_a_full_build(corpus, monkeypatch, tmp_path):
    docs, root = corpus
    statements = _forbid_listing(monkeypatch)
    (docs / "d00003.md").write_text("first edit w5\n")
    _build(root, [docs / "d00003.md"])
    (docs / "new.md").write_text("an added document w9\n")
    assert _build(root, [docs / "new.md"]).docs_added == 1
    (docs / "d00010.md").unlink()
    (docs / "d00011.md").write_text("second edit w6\n")
    report = _build(root, [docs])  # the folder again: d00010 gone from a path given now, so removed
    assert (report.docs_updated, report.docs_removed, report.docs_added, report.docs_unchanged) == (1, 1, 0, N - 1)
    removed = IndexBuilder(root, embedder=HashEmbedder(), progress=False).remove(["docs/d00020.md"])
    assert removed.docs_removed == 1 and removed.docs_kept == N - 1  # 300 + new.md - d00010 - d00020
    assert _full_scans(statements) == []
    monkeypatch.undo()
    (docs / "d00020.md").unlink()
    full = tmp_path / "full"
    _build(full, [docs])
    inc, ref = read_manifest(current_generation(root)), read_manifest(current_generation(full))
    assert inc["corpus_fingerprint"] == ref["corpus_fingerprint"]
    assert inc["counts"]["documents"] == ref["counts"]["documents"] == N - 1
    assert inc["corpus_fingerprint_kind"] == change_plan.FINGERPRINT_KIND


def test_an_index_without_an_updatable_fingerprint_is_listed_once_then_not(corpus, monkeypatch):
    """Indexes written before the fingerprint could be updated: the next build lists the corpus once."""
    docs, root = corpus
    gen = current_generation(root)
    manifest = read_manifest(gen)
    del manifest["corpus_fingerprint_kind"]
    (gen / "manifest.json").write_text(json.dumps(manifest))
    listed = []
    real = builder_module.listed_change
    monkeypatch.setattr(builder_module, "listed_change", lambda *a, **k: listed.append(1) or real(*a, **k))
    (docs / "d00001.md").write_text("edit one w3\n")
    _build(root, [docs / "d00001.md"])
    (docs / "d00002.md").write_text("edit two w4\n")
    _build(root, [docs / "d00002.md"])
    assert listed == [1]


def test_scopes_match_like_in_scope(corpus):
    _docs, root = corpus
    store = ChunkStore(current_generation(root) / "chunks.sqlite", read_only=True)
    try:
        every = list(store.documents())
        for scopes in (["docs/d0001"], ["docs/d00012.md"], ["docs/"], ["docs/d00012.md", "docs/d00299.md"], ["doc"], [""]):
            expected = {i for i in every if in_scope(i, [s for s in scopes if s])}
            assert set(change_plan.ids_in_scopes(store, scopes)) == expected
    finally:
        store.close()


def test_the_documents_api_finds_a_files_documents_by_range_probes(tmp_path, monkeypatch):
    """What an upload or a removal asks of a store (which files are indexed, whether other files remain)
    is answered by range probes on the doc_id index, never a listing of the store's documents."""
    from ragsieve.service.documents.ingest import indexed_files

    files = tmp_path / "files"
    for fid in ("f1", "f2", "f10"):
        _write(files / fid, 3, seed=len(fid))
    _build(tmp_path / "index", [files / "f1", files / "f2"])
    statements = _forbid_listing(monkeypatch)
    assert indexed_files(tmp_path / "index", ["f1", "f10", "f3"]) == ({"f1"}, False)
    assert indexed_files(tmp_path / "index", ["f1"]) == ({"f1"}, True)  # f2 is still there
    assert statements and not _full_scans(statements)
    assert indexed_files(tmp_path / "missing", ["f1"]) == (set(), False)
    monkeypatch.undo()
    _build(tmp_path / "alone", [files / "f10"])
    assert indexed_files(tmp_path / "alone", ["f10"]) == ({"f10"}, False)  # its last file: the store can go
    assert indexed_files(tmp_path / "alone", ["f1"]) == (set(), True)
