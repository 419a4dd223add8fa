"""IndexBuilder: atomic generations, crash safety, incremental updates, refusals."""

import json

import numpy as np
import pytest

import ragsieve.tools.index.building.generation_writer as gw
import ragsieve.tools.index.local.generations as generations
from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.report import indexed_text
from ragsieve.tools.index.local.index import HybridIndex

FILES = {
    "alpha.md": "# Alpha\n\nThe alpha service rotates API keys every ninety days.",
    "beta.md": "# Beta\n\nBeta stores backups in a cold bucket, encrypted at rest.",
    "gamma.txt": "Gamma is the billing job; it runs nightly and emails invoices.",
}


@pytest.fixture()
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _builder(root, embedder, **kw):
    return IndexBuilder(root, embedder=embedder, progress=False, **kw)


def _vectors_by_doc(index):
    return {index.store.get(r).doc_id: np.array(index.vectors[r]) for r in range(len(index))}


def _entries(root):
    """The index folder's entries besides the embedding checkpoint (embeddings.sqlite)."""
    return sorted(p.name for p in root.iterdir() if p.name != "embeddings.sqlite")


def test_build_writes_a_generation_and_reindex_is_a_noop(tmp_path, corpus, embedder):
    root = tmp_path / "index"
    report = _builder(root, embedder).build([corpus])
    assert report.written and report.generation == "gen-1"
    assert (report.docs_added, report.chunks_total, report.chunks_embedded) == (3, 3, 3)
    assert (root / "CURRENT").read_text().strip() == "gen-1"
    for name in ("segments/seg-1/vectors.npy", "segments/seg-1/tf.npy", "sparse.json", "manifest.json"):
        assert (root / "gen-1" / name).exists()  # the incremental layout: chunks in the shared store
    assert (root / "store-1.sqlite").is_file()
    manifest = json.loads((root / "gen-1" / "manifest.json").read_text())
    assert manifest["embedding"] == {
        "provider": "sentence-transformers",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "dimension": 384,
        "encoder": "torch",
    }
    assert manifest["bm25"]["engine"] == "bm25s" and manifest["faiss"]["kind"] == "flat"
    assert manifest["counts"]["chunks"] == 3 and manifest["versions"]["faiss-cpu"]
    again = _builder(root, embedder).build([corpus])
    assert not again.written and again.chunks_embedded == 0 and again.docs_unchanged == 3
    assert again.generation == "gen-1" and _entries(root) == [".lock", "CURRENT", "gen-1", "store-1.sqlite"]
    with HybridIndex.open(root) as index:
        assert index.manifest["corpus_fingerprint"] == manifest["corpus_fingerprint"]
        assert len(index) == 3 and index.vectors.shape == (3, 384)


def test_changed_added_deleted_only_touch_those_docs(tmp_path, corpus, embedder):
    root = tmp_path / "index"
    _builder(root, embedder).build([corpus])
    with HybridIndex.open(root) as index:
        before = _vectors_by_doc(index)
        fingerprint = index.manifest["corpus_fingerprint"]
    (corpus / "alpha.md").write_text("# Alpha\n\nAlpha now rotates keys weekly.", encoding="utf-8")
    (corpus / "beta.md").unlink()
    (corpus / "delta.md").write_text("# Delta\n\nDelta is the search cluster.", encoding="utf-8")
    report = _builder(root, embedder).build([corpus])
    assert (report.docs_added, report.docs_updated, report.docs_removed, report.docs_unchanged) == (1, 1, 1, 1)
    assert report.chunks_embedded == 2 and report.chunks_total == 3 and report.generation == "gen-2"
    assert (root / "gen-1").exists()  # the replaced generation is kept for readers still opening it
    with HybridIndex.open(root) as index:
        after = _vectors_by_doc(index)
        alpha_text = indexed_text(index.store.get(0))
        assert index.manifest["corpus_fingerprint"] != fingerprint
        assert [c.doc_id.rsplit("/", 1)[1] for c in index.store.get_many(range(3))] == ["alpha.md", "delta.md", "gamma.txt"]
    gamma = next(d for d in after if d.endswith("gamma.txt"))
    alpha = next(d for d in after if d.endswith("alpha.md"))
    assert np.array_equal(after[gamma], before[gamma])  # copied, not re-embedded
    assert not np.allclose(after[alpha], before[alpha])
    assert "Alpha now rotates keys weekly." in alpha_text
    expected = embedder.embed([alpha_text])[0]
    assert after[alpha] == pytest.approx(expected, abs=1e-5)


def test_failure_mid_build_keeps_the_old_index(tmp_path, corpus, embedder, monkeypatch):
    root = tmp_path / "index"
    _builder(root, embedder).build([corpus])
    (corpus / "gamma.txt").write_text("Gamma changed.", encoding="utf-8")

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(gw, "sparse_record", boom)  # (the generation writer, split from the builder)
    with pytest.raises(KeyboardInterrupt):
        _builder(root, embedder).build([corpus])
    assert _entries(root) == [".lock", "CURRENT", "gen-1", "store-1.sqlite"]
    with HybridIndex.open(root) as index:
        assert index.path.name == "gen-1" and "Gamma is the billing job" in index.store.texts()[2]


def test_crash_before_current_switch_keeps_old_then_recovers(tmp_path, corpus, embedder, monkeypatch):
    root = tmp_path / "index"
    _builder(root, embedder).build([corpus])
    (corpus / "gamma.txt").write_text("Gamma changed.", encoding="utf-8")
    monkeypatch.setattr(generations.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk gone")))
    with pytest.raises(OSError):
        _builder(root, embedder).build([corpus])
    monkeypatch.undo()
    with HybridIndex.open(root) as index:
        assert index.path.name == "gen-1"
    report = _builder(root, embedder).build([corpus])
    assert report.generation == "gen-3" and report.chunks_embedded == 1
    assert _entries(root) == [".lock", "CURRENT", "gen-1", "gen-3", "store-1.sqlite"]  # orphan gen-2 gone


def test_model_mismatch_refused_and_settings_change_rebuilds(tmp_path, corpus, embedder):
    root = tmp_path / "index"
    _builder(root, embedder).build([corpus])
    with pytest.raises(UsageError, match="rebuild"):
        IndexBuilder(root, embedding_model="intfloat/e5-small-v2", progress=False).build([corpus])
    with pytest.raises(UsageError, match="differs"):
        IndexBuilder(root, embedding_model="intfloat/e5-small-v2", embedder=embedder)
    report = _builder(root, embedder, faiss_index="hnsw").build([corpus])  # index-only change: no re-embedding
    assert report.written and report.chunks_embedded == 0
    report = _builder(root, embedder).build([corpus], rebuild=True)
    assert report.written and report.chunks_embedded == 3


def test_usage_errors_and_missing_index(tmp_path, embedder):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="nothing to index"):
        _builder(tmp_path / "index", embedder).build([empty])
    with pytest.raises(UsageError, match="flat, hnsw"):
        IndexBuilder(tmp_path / "i", faiss_index="ivf")
    with pytest.raises(IndexMissingError, match="does not exist"):
        HybridIndex.open(tmp_path / "nope")
    with pytest.raises(IndexMissingError, match="CURRENT"):
        HybridIndex.open(empty)
    (empty / "CURRENT").write_text("gen-1\n")
    (empty / "gen-1").mkdir()
    with pytest.raises(IndexMissingError, match="incomplete"):
        HybridIndex.open(empty)
