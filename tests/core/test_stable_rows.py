"""Stable rows: a change of k documents rewrites O(k) rows, locally (`changes.json`) and on Milvus (rows written
and retired), and both backends show the same rows after every kind of change. Vectors come from a hash
embedder (deterministic, instant): these tests are about rows, not retrieval quality."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np

from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.generation_writer import read_changes
from ragsieve.tools.index.building.layout import plan_rows
from ragsieve.tools.index.local.generations import current_generation
from ragsieve.tools.index.local.index import HybridIndex


class HashEmbedder:
    """Unit vectors from sha256 of the text: same text, same vector; no model."""

    name, dimension, encoder = "hash-test-16", 16, "torch"

    def __init__(self, device: str = "cpu") -> None:
        self.device = device  # a Ray actor builds its encoder on the device it reserved

    def embed(self, texts, progress=False):
        out = (
            np.asarray([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts], dtype=np.float32)
            - 127.5
        )
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def write_corpus(folder: Path, n: int, version: dict[int, int] | None = None, chunks: int = 1) -> None:
    """`n` documents; document i carries `version[i]` in every chunk, `chunks` paragraphs long."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        v = (version or {}).get(i, 0)
        paras = "\n\n".join(
            f"Document {i} part {p} version {v}. " + " ".join(f"w{i}x{p}x{k}" for k in range(40)) for p in range(chunks)
        )
        (folder / f"doc{i:04d}.md").write_text(f"# Doc {i}\n\n{paras}\n", encoding="utf-8")


def builder(index: Path, **kw) -> IndexBuilder:
    return IndexBuilder(index, embedder=HashEmbedder(), progress=False, chunk_tokens=80, **kw)


def snapshot(index) -> list[tuple]:
    n = len(index)
    chunks = index.store.get_many(range(n))
    vecs = np.asarray(index.vectors[list(range(n))], dtype=np.float32)
    return [(c.doc_id, c.chunk_index, c.text, tuple(np.round(v, 5))) for c, v in zip(chunks, vecs)]


# -- the layout ---------------------------------------------------------------------------------------------


def test_plan_rows_keeps_unchanged_rows_and_stays_dense():
    rng = random.Random(7)
    for _ in range(200):
        n_base = rng.randint(0, 60)
        freed = rng.sample(range(n_base), rng.randint(0, n_base))
        new = [(f"d{i}", rng.randint(0, 5)) for i in range(rng.randint(0, 6))]
        lay = plan_rows(n_base, freed, new)
        kept = [r for r in range(n_base) if r not in set(freed)]
        final = sorted([lay.kept_row(r) for r in kept] + [r for rows in lay.new_rows.values() for r in rows])
        assert final == list(range(lay.n))  # dense, no row used twice
        assert all(lay.kept_row(r) == r for r in kept if r < lay.n)  # only rows past the new end move
        assert len(lay.changed) <= len(freed) + sum(c for _, c in new)  # O(k), never the corpus
        assert set(lay.changed) == {r for r in range(lay.n)} - {lay.kept_row(r) for r in kept if lay.kept_row(r) == r}


# -- local: change one document of 500 ----------------------------------------------------------------------


def test_local_change_one_document_of_500_rewrites_only_its_rows(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 500)
    builder(index).build([docs])
    with HybridIndex.open(index, embedder=HashEmbedder()) as before:
        old = snapshot(before)
        rows_of_250 = before.store.doc_rows(next(d for d in before.store.documents() if "doc0250" in d))
    write_corpus(docs, 500, {250: 1})
    report = builder(index).build([docs])
    assert report.docs_updated == 1 and report.chunks_embedded == len(rows_of_250)
    gen = current_generation(index)
    changes = read_changes(gen)
    with HybridIndex.open(index, embedder=HashEmbedder()) as after:
        new = snapshot(after)
    differ = [r for r in range(len(new)) if r >= len(old) or old[r] != new[r]]
    assert differ == rows_of_250 and changes["changed"] == rows_of_250  # the same rows, nothing else
    assert changes["base_rows"] == changes["rows"] == len(old)


def test_local_removal_moves_only_tail_rows_and_neighbours_follow_chunk_order(tmp_path):
    docs, index = tmp_path / "docs", tmp_path / "idx"
    write_corpus(docs, 30, chunks=3)
    builder(index).build([docs])
    for i in (3, 11):
        (docs / f"doc{i:04d}.md").unlink()
    write_corpus(docs / "more", 1, {0: 5}, chunks=2)
    builder(index).build([docs])
    changes = read_changes(current_generation(index))
    with HybridIndex.open(index, embedder=HashEmbedder()) as idx:
        n = len(idx)
        assert changes["base_rows"] - 6 + 2 == n and len(changes["changed"]) <= 6
        assert sorted(c.doc_id for c in idx.store.get_many(range(n)))  # every row readable: dense
        for doc in idx.store.documents():
            rows = idx.store.doc_rows(doc)
            assert [c.chunk_index for c in idx.store.get_many(rows)] == list(range(len(rows)))
            if len(rows) == 3:
                assert idx.store.neighbours(rows[1]) == [rows[0], rows[2]]
