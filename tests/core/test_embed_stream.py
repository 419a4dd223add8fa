"""The overlapped indexing pipeline (issue 47): documents are chunked in a thread while the encoder embeds their
texts into the checkpoint, through a bounded queue, in length-sorted windows whose vectors go back to the texts'
order. It yields the index the serial path yields: same chunk ids and rows, vectors equal to float precision (a
hash encoder; the real MiniLM in fp32, torch). A failure in either thread stops the build; a killed build
resumes from the checkpoint."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.embed_cache import EmbeddingCache
from ragsieve.tools.index.building.embed_stream import QUEUE_WINDOWS, ChunkEmbedStream, embed_in_length_order
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.types import Chunk, Document
from tests.core.test_stable_rows import HashEmbedder, write_corpus

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact" / "corpus.jsonl.gz"


def contents(folder: Path, embedder) -> tuple[list[str], np.ndarray]:
    with HybridIndex.open(folder, embedder=embedder) as index:
        ids = [c.chunk_id for c in index.store.get_many(range(len(index)))]
        return ids, np.asarray(index.vectors[list(range(len(index)))], dtype=np.float32)


def bm25_hits(folder: Path, embedder, queries: list[str]) -> list[list[tuple[int, float]]]:
    with HybridIndex.open(folder, embedder=embedder) as index:
        return [index.bm25.search(q, 10) for q in queries]


def test_a_window_goes_longest_first_and_comes_back_in_order():
    seen: list[list[str]] = []

    def embed(texts):
        seen.append(list(texts))
        return np.asarray([[len(t), 1.0] for t in texts], dtype=np.float32)

    texts = ["bb", "a", "dddd", "ccc", "a"]
    out = embed_in_length_order(embed, texts)
    assert seen == [["dddd", "ccc", "bb", "a", "a"]]
    assert out[:, 0].tolist() == [2, 1, 4, 3, 1]


def test_the_overlapped_build_equals_the_serial_one_with_a_hash_encoder(tmp_path):
    write_corpus(tmp_path / "docs", 300, chunks=2)
    serial = IndexBuilder(tmp_path / "serial", embedder=HashEmbedder(), progress=False, chunk_tokens=80, overlap=False)
    serial.build([tmp_path / "docs"])
    progress: list[tuple] = []
    streamed = IndexBuilder(
        tmp_path / "stream", embedder=HashEmbedder(), progress=lambda *a: progress.append(a), chunk_tokens=80, batch_size=16
    )
    report = streamed.build([tmp_path / "docs"])
    assert streamed._streamed == 600 and streamed.resumed_embeddings == 0  # 300 documents >= 256: streamed
    ids, vectors = contents(tmp_path / "stream", HashEmbedder())
    ref_ids, ref_vectors = contents(tmp_path / "serial", HashEmbedder())
    assert ids == ref_ids and np.array_equal(vectors, ref_vectors)
    assert report.chunks_embedded == 600 and ("embedding", 600, 600) in progress
    queries = ["document 17 part 1", "w5x0x3 version", "doc 250"]  # BM25 tokenized by the chunking thread
    assert bm25_hits(tmp_path / "stream", HashEmbedder(), queries) == bm25_hits(tmp_path / "serial", HashEmbedder(), queries)
    assert all(bm25_hits(tmp_path / "stream", HashEmbedder(), queries))


@pytest.mark.skipif(not SCIFACT.is_file(), reason="SciFact not in ../shared/data")
def test_the_overlapped_build_equals_the_serial_one_with_minilm_fp32(tmp_path):
    """Real abstracts, the packaged MiniLM (torch, fp32: its vectors do not depend on the batch a text is in;
    onnx-int8's do, by up to 0.007 in cosine, so it is not the reference here)."""
    from ragsieve.tools.index.embedders.local_embedder import Embedder

    with gzip.open(SCIFACT, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in itertools.islice(f, 40)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    model = Embedder(encoder="torch", batch_size=8)
    IndexBuilder(tmp_path / "serial", embedder=model, progress=False, overlap=False).build([corpus])
    streamed = IndexBuilder(tmp_path / "stream", embedder=model, progress=False, batch_size=4)
    streamed.stream_min_docs, streamed.stream = 1, True  # windows of 16 texts, unlike the serial path's batches
    streamed.build([corpus])
    assert streamed._streamed > 40
    ids, vectors = contents(tmp_path / "stream", model)
    ref_ids, ref_vectors = contents(tmp_path / "serial", model)
    assert ids == ref_ids and np.abs(vectors - ref_vectors).max() < 1e-5


def test_a_local_model_on_the_cpu_is_not_streamed_a_gpu_or_an_endpoint_is(tmp_path, monkeypatch):
    from ragsieve.tools.index.building.embedding import streams
    from ragsieve.tools.index.embedders import device as device_mod

    assert not streams(IndexBuilder(tmp_path / "a", progress=False, device="cpu").context())
    monkeypatch.setattr(device_mod.TorchAccelerators, "cuda_count", lambda self: 1)
    assert streams(IndexBuilder(tmp_path / "b", progress=False, device="cuda").context())
    assert streams(IndexBuilder(tmp_path / "c", progress=False, embedder=HashEmbedder()).context())  # an endpoint-like one
    forced = IndexBuilder(tmp_path / "d", progress=False, device="cpu")
    forced.stream = True
    assert streams(forced.context())


def _docs(n: int) -> list[Document]:
    return [Document(doc_id=f"d{i}", source=f"d{i}", title="", text=f"text {i} " * (i % 5 + 1)) for i in range(n)]


def _chunk(doc: Document) -> list[Chunk]:
    return [Chunk(doc_id=doc.doc_id, chunk_index=0, source=doc.source, text=doc.text)]


def test_the_queue_is_bounded(tmp_path):
    cut: list[int] = []
    at_embed: list[int] = []

    def chunk(doc):
        cut.append(1)
        return _chunk(doc)

    def embed(texts):
        at_embed.append(len(cut))
        return np.ones((len(texts), 2), dtype=np.float32)

    cache = EmbeddingCache(tmp_path / "e.sqlite", "m")
    try:
        chunked = ChunkEmbedStream(chunk, lambda c: c.text, embed, cache, window=1).run(_docs(30))
    finally:
        cache.close()
    assert [d.doc_id for d, _ in chunked] == [f"d{i}" for i in range(30)]
    # window i is embedded when at most i + 1 windows were taken, QUEUE_WINDOWS wait, and one more is being put
    assert all(n <= i + 2 + QUEUE_WINDOWS for i, n in enumerate(at_embed)), at_embed


def test_a_failing_chunker_or_encoder_stops_the_build_and_a_killed_one_resumes(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite", "m")

    def bad_chunk(doc):
        if doc.doc_id == "d7":
            raise ValueError("cannot cut d7")
        return _chunk(doc)

    try:
        with pytest.raises(ValueError, match="cannot cut d7"):
            ChunkEmbedStream(bad_chunk, lambda c: c.text, lambda t: np.ones((len(t), 2)), cache, 2).run(_docs(30))
    finally:
        cache.close()
    write_corpus(tmp_path / "docs", 300)
    calls: list[int] = []
    real = HashEmbedder()

    class Dying(HashEmbedder):
        def embed(self, texts, progress=False):
            calls.append(len(texts))
            if len(calls) == 3:
                raise KeyboardInterrupt  # killed while its third window is embedded
            return real.embed(texts)

    with pytest.raises(KeyboardInterrupt):
        IndexBuilder(tmp_path / "idx", embedder=Dying(), progress=False, chunk_tokens=80, batch_size=16).build(
            [tmp_path / "docs"]
        )
    assert not list((tmp_path / "idx").glob("gen-*"))  # nothing half-written
    counted: list[int] = []

    class Counting(HashEmbedder):
        def embed(self, texts, progress=False):
            counted.append(len(texts))
            return real.embed(texts)

    again = IndexBuilder(tmp_path / "idx", embedder=Counting(), progress=False, chunk_tokens=80, batch_size=16)
    report = again.build([tmp_path / "docs"])
    assert report.chunks_total == 300 and sum(counted) == 300 - 2 * 64  # two windows of 64 were checkpointed
    assert again.resumed_embeddings == 2 * 64
