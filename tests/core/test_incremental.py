"""The incremental local layout (`ragsieve.tools.index.building.incremental`): a sequence of small changes searches like a
full rebuild of the same final corpus, and the work of a one-document change does not grow with the corpus."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest

from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever

WORDS = [f"w{i}" for i in range(400)]


class HashEmbedder:
    """Unit vectors from the text's hash (no model): distinct, deterministic, cheap."""

    name, dimension, encoder = "test/hash-32", 32, "torch"

    def embed(self, texts, progress=False):
        out = (
            np.asarray([np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8) for t in texts], dtype=np.float32)
            - 127.5
        )
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _write(folder, n, seed=0, edits=()):
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(25)]
        (folder / f"d{i:05d}.md").write_text(" ".join(words) + (" edited" if i in edits else "") + "\n")


def _results(root, queries):
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        retriever = HybridRetriever(index, candidate_k=20)
        out = {}
        for q in queries:
            hits = retriever.run(q, top_k=10)
            out[q] = [(h.chunk.doc_id, round(h.score, 9), h.bm25_score, h.dense_score) for h in hits]
        sparse = sorted(index.store.get(r).doc_id for r in index.sparse_rows)
        return out, sparse, index.bm25.scores(queries[0]), index.store.row_of


@pytest.mark.parametrize("max_segments", [16, 2])  # 2: the sequence compacts into a new base twice
def test_incremental_changes_search_like_a_full_rebuild(tmp_path, monkeypatch, max_segments):
    import ragsieve.tools.index.building.incremental as incremental

    monkeypatch.setattr(incremental, "MAX_SEGMENTS", max_segments)
    corpus = tmp_path / "docs"
    _write(corpus, 120)
    inc = tmp_path / "inc"
    IndexBuilder(inc, embedder=HashEmbedder(), progress=False).build([corpus])
    for step in range(4):  # edit, add, delete (fewer rows: moves), edit again
        if step == 0:
            _write(corpus, 120, edits={3, 40})
        elif step == 1:
            (corpus / "new.md").write_text("w1 w2 brand new document w3 edited\n")
        elif step == 2:
            for i in (5, 6, 7, 8):
                (corpus / f"d{i:05d}.md").unlink()
        else:
            (corpus / "d00050.md").write_text("w7 w7 w9 changed twice\n")
        report = IndexBuilder(inc, embedder=HashEmbedder(), progress=False).build([corpus])
        assert report.written and report.chunks_embedded <= 2
    manifest = json.loads((inc / report.generation / "manifest.json").read_text())
    assert manifest["layout"] == "segments"
    assert len(manifest["segments"]) == (5 if max_segments == 16 else 1)  # base + four deltas / just compacted
    full = tmp_path / "full"
    IndexBuilder(full, embedder=HashEmbedder(), progress=False).build([corpus], rebuild=True)
    queries = ["w1 edited", "w3 w7", "brand new document", "w0 w2 w9 changed", "w12 w30"]
    a, sparse_a, bm_a, row_a = _results(inc, queries)
    b, sparse_b, bm_b, row_b = _results(full, queries)
    for q in queries:  # same documents at the same ranks (RRF ties: rows differ, so tied documents are
        # compared as a set per score); scores equal to float precision
        assert np.allclose([x[1] for x in a[q]], [x[1] for x in b[q]], atol=1e-6), q
        ga, gb = _by_score(a[q]), _by_score(b[q])
        last = min(ga)  # the top-k cut may split documents tied on every score (ties go to the lower row)
        assert {k: v for k, v in ga.items() if k != last} == {k: v for k, v in gb.items() if k != last}, q
    assert sparse_a == sparse_b  # the sparse subset: same chunks, the cut-off from the same numbers
    with HybridIndex.open(inc, embedder=HashEmbedder()) as i1, HybridIndex.open(full, embedder=HashEmbedder()) as i2:
        assert len(i1) == len(i2) == 117
        docs = [c.doc_id for c in i2.store.get_many(range(len(i2)))]
        rows1 = [i1.store.row_of(d, 0) for d in docs]
        assert np.allclose(i1.bm25.scores("w1 w3 edited")[rows1], i2.bm25.scores("w1 w3 edited"), atol=1e-9)
        assert np.allclose(np.asarray(i1.vectors)[rows1], np.asarray(i2.vectors), atol=1e-7)


def _by_score(hits):
    groups: dict = {}
    for doc, score, bm25, dense in hits:
        groups.setdefault(round(score, 7), set()).add((doc, round(bm25, 6), round(dense, 5)))
    return groups


def _one_change_work(tmp_path, n):
    corpus = tmp_path / f"docs{n}"
    _write(corpus, n, seed=n)
    root = tmp_path / f"idx{n}"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    _write(corpus, n, seed=n, edits={n // 2})
    report = IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    gen = root / report.generation
    manifest = json.loads((gen / "manifest.json").read_text())
    new_bytes = sum(f.stat().st_size for f in gen.rglob("*") if f.is_file() and f.stat().st_nlink == 1)
    linked = sum(1 for f in gen.rglob("*") if f.is_file() and f.stat().st_nlink > 1)
    return manifest["io"], new_bytes, linked, report


def test_one_document_change_writes_the_same_whatever_the_corpus_size(tmp_path):
    small_io, small_bytes, small_links, r1 = _one_change_work(tmp_path, 150)
    big_io, big_bytes, big_links, r2 = _one_change_work(tmp_path, 1500)
    assert r1.docs_updated == r2.docs_updated == 1 and r1.chunks_embedded == r2.chunks_embedded == 1
    assert not small_io["compacted"] and not big_io["compacted"]
    assert small_io["store_rows_written"] == big_io["store_rows_written"] == 2  # one retired, one added
    assert small_links == big_links > 0  # the base is hard-linked, not copied
    # the new files (the delta segment, manifest, change list): a few kB either way, not 10x for 10x the rows
    assert big_bytes < 1.5 * small_bytes + 4096, (small_bytes, big_bytes)


def test_an_index_in_the_old_layout_is_read_and_migrated(tmp_path):
    corpus = tmp_path / "docs"
    _write(corpus, 60)
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False, segments=False).build([corpus])
    assert (root / "gen-1" / "chunks.sqlite").is_file()
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        before = [h.chunk.doc_id for h in HybridRetriever(index).run("w1 w2", top_k=5)]
    _write(corpus, 60, edits={10})
    report = IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    assert report.chunks_embedded == 1 and report.docs_unchanged == 59
    manifest = json.loads((root / report.generation / "manifest.json").read_text())
    assert manifest["layout"] == "segments"
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        assert len(index) == 60 and "edited" in index.store.chunks_of(sorted(index.store.documents())[10])[0].text
        assert [h.chunk.doc_id for h in HybridRetriever(index).run("w1 w2", top_k=5)]  # searchable
    assert before


def test_a_reader_keeps_its_generation_while_records_are_retired(tmp_path):
    corpus = tmp_path / "docs"
    _write(corpus, 40)
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    old = HybridIndex.open(root, embedder=HashEmbedder())
    texts_before = old.store.texts()
    for k in range(3):  # three publishes: gen-1 is no longer the live one nor the one kept for racing readers
        _write(corpus, 40, edits={k})
        IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    assert (root / "gen-1").is_dir() and old.store.texts() == texts_before  # its lease kept it, records and all
    old.close()
    _write(corpus, 40, edits={9})
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    assert not (root / "gen-1").exists()


@pytest.mark.parametrize("part", ["segments/seg-1/vectors.npy", "sparse.json"])
def test_damaged_incremental_generation_gives_one_clear_line(tmp_path, part):
    corpus = tmp_path / "docs"
    _write(corpus, 20)
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    (root / "gen-1" / part).write_bytes(b"garbage")
    with pytest.raises(IndexMissingError) as caught:
        HybridIndex.open(root)
    assert "\n" not in str(caught.value) and "gen-1" in str(caught.value)


KILLER = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from tests.core.test_incremental import HashEmbedder
import ragsieve.tools.index.building.{module} as target
from ragsieve.tools.index.building.builder import IndexBuilder
def die(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
target.{name} = die
IndexBuilder({root!r}, embedder=HashEmbedder(), progress=False).build([{corpus!r}])
"""


@pytest.mark.parametrize(
    "module, name",
    [
        ("incremental", "write_segment"),  # after the store's commit
        ("builder", "switch_current"),
    ],
)  # the generation written, not switched
def test_kill_9_mid_publish_leaves_the_previous_state_and_the_next_build_completes_it(tmp_path, module, name):
    import subprocess
    import sys
    from pathlib import Path

    corpus = tmp_path / "docs"
    _write(corpus, 30)
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        before = sorted(index.store.texts())
    _write(corpus, 30, edits={4})
    (corpus / "d00007.md").unlink()
    script = KILLER.format(
        repo=str(Path(__file__).resolve().parents[2]), module=module, name=name, root=str(root), corpus=str(corpus)
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-500:]
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:  # the previous state, whole
        assert index.path.name == "gen-1" and sorted(index.store.texts()) == before and len(index) == 30
    report = IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([corpus])
    assert report.written and (report.docs_updated, report.docs_removed) == (1, 1)
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        texts = index.store.texts()
        assert len(index) == len(texts) == 29 and sum("edited" in t for t in texts) == 1
        assert len(index.store.documents()) == 29
