"""The access benchmark's corpora and indexes (`benchmarks/access/main.py`): clustered synthetic vectors and texts cut
into documents of `CHUNKS_PER_DOC` chunks, a local index (chunk store, BM25, a FAISS kind; an HNSW graph read
from or written to a cache) and a milvus-lite one.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

CHUNKS_PER_DOC = 10
NOISE = 0.6  # norm of the noise added to a real vector: a copy keeps cosine ~0.86 to its source


def synthetic(n: int, dim: int, seed: int = 0, base: np.ndarray | None = None):
    """n unit vectors and generated texts. With `base` (real embeddings), vector i is base[i % len(base)] plus
    isotropic noise of norm NOISE, renormalised: the clustered geometry of real text, unlike random vectors
    (on which HNSW recall is at its worst)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(20000)]
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    if base is not None:
        vectors *= NOISE / np.sqrt(dim)
        for start in range(0, n, 100_000):
            rows = np.arange(start, min(n, start + 100_000))
            vectors[rows] += base[rows % len(base)]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lengths = rng.integers(8, 40, n)
    words = rng.zipf(1.3, int(lengths.sum())) % len(vocab)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[w] for w in words[at : at + length]))
        at += length
    return vectors, texts


def local_parts(n: int, texts, work: Path):
    """The chunk store (10 chunks a document) and BM25 index, shared by the FAISS kinds measured."""
    from ragsieve.tools.index.local.store import ChunkStore
    from ragsieve.tools.index.search.bm25 import BM25Index
    from ragsieve.tools.types import Chunk

    folder = work / f"local-{n}"
    folder.mkdir()
    store = ChunkStore(folder / "chunks.sqlite")
    for j in range(0, n, CHUNKS_PER_DOC):
        doc = f"docs/d{j // CHUNKS_PER_DOC}"
        store.add_document(
            doc,
            doc,
            "",
            [Chunk(doc_id=doc, chunk_index=i - j, text=texts[i], source=doc) for i in range(j, min(n, j + CHUNKS_PER_DOC))],
        )
        if j % 50_000 == 0:
            store.commit()
    store.commit()
    return folder, store, BM25Index().build(texts)


def local_index(folder: Path, store, bm25, vectors, kind: str, hnsw_m: int, ef_construction: int, cache: Path | None = None):
    """A local index over the shared parts with a FAISS index of `kind` (HNSW built on both cores). With `cache`,
    an HNSW graph an earlier run built from the same seeded vectors is read from it (checked: same rows, same
    stored vectors), and one built here is written there: the build is the slow part (minutes at 100k)."""
    import faiss

    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.search.dense import DenseIndex

    dense = DenseIndex(kind, hnsw_m=hnsw_m, ef_search=128, ef_construction=ef_construction)
    saved = None if cache is None or kind != "hnsw" else cache / f"hnsw-{len(vectors)}-{hnsw_m}-{ef_construction}.faiss"
    read = False
    if saved is not None and saved.is_file():
        graph = faiss.read_index(str(saved))
        probe = [0, len(vectors) // 2, len(vectors) - 1]
        if graph.ntotal == len(vectors) and np.array_equal(np.stack([graph.reconstruct(i) for i in probe]), vectors[probe]):
            dense._set(graph, vectors)
            read = True
    if not read:
        faiss.omp_set_num_threads(2)
        try:
            dense.build(vectors)
        finally:
            faiss.omp_set_num_threads(1)  # queries: one thread, as served
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            faiss.write_index(dense._index, str(saved))
    index = HybridIndex(folder, folder, {"embedding": {"model": "synthetic"}}, store, bm25, dense, [])
    return index, (str(saved) if read else None)


def milvus_index(n: int, vectors, texts, work: Path):
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus.index import FILTER_CACHE_SIZE, MilvusIndex
    from ragsieve.tools.index.milvus.row_meta import write_row_metadata
    from ragsieve.tools.index.milvus.schema import analysed, create_collection
    from ragsieve.tools.index.milvus.search import MilvusBM25, MilvusDense
    from ragsieve.tools.index.milvus.store import MilvusStore, MilvusVectors
    from ragsieve.tools.index.search.admitted import AdmittedCache

    folder = work / f"milvus-{n}"
    folder.mkdir()
    client = MilvusClient(str(folder / "milvus.db"))
    create_collection(client, "synthetic", vectors.shape[1], "HNSW")
    for start in range(0, n, 5000):
        client.insert(
            "synthetic",
            [
                {
                    "pk": i,
                    "row": i,
                    "born": 0,
                    "died": 2**62,
                    "doc_id": f"docs/d{i // CHUNKS_PER_DOC}",
                    "chunk_index": i % CHUNKS_PER_DOC,
                    "text": texts[i],
                    "search_text": analysed(texts[i], True),
                    "source": f"docs/d{i // CHUNKS_PER_DOC}",
                    "title": "",
                    "kind": "text",
                    "symbol": "",
                    "line_start": -1,
                    "line_end": -1,
                    "text_hash": "",
                    "doc_hash": "",
                    "tenant": "default",
                    "dense": vectors[i].tolist(),
                }
                for i in range(start, min(n, start + 5000))
            ],
        )
    client.flush("synthetic")
    client.load_collection("synthetic")

    class Synthetic:  # the backend surface the retriever and the access filter use
        filter_rows, sources, admitted = MilvusIndex.filter_rows, MilvusIndex.sources, MilvusIndex.admitted
        row_metadata = MilvusIndex.row_metadata
        lexical_within, dense_within = MilvusIndex.lexical_within, MilvusIndex.dense_within
        symbols = None  # Milvus keeps no symbol table

        def __len__(self):
            return n

    index = Synthetic()
    meta_file = write_row_metadata(
        folder, "synthetic", ((i, f"docs/d{i // CHUNKS_PER_DOC}", "text") for i in range(n))
    )  # as a publish writes it
    index.root, index.client, index.visible = folder, client, None
    index.pointer = {"collection": "synthetic", "rows": n, "meta_file": meta_file}
    index._sources, index._lock = None, threading.Lock()
    index._filter_cache = AdmittedCache(FILTER_CACHE_SIZE)
    index._meta, index._meta_read = None, False
    index.bm25, index.dense = MilvusBM25(client, "synthetic"), MilvusDense(client, "synthetic")
    index.store = MilvusStore(client, "synthetic", n)
    index.vectors = MilvusVectors(client, "synthetic", n, vectors.shape[1])
    index.exact_vectors = vectors
    return index, folder, client


def clustered(n: int, seed: int = 0):
    """`synthetic` vectors around n / 50 random unit centres (a vector keeps cosine ~0.86 to its centre):
    clustered like text embeddings, where isotropic random vectors are an ANN index's worst case."""
    centres = np.random.default_rng(seed + 1).standard_normal((max(1, n // 50), 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return synthetic(n, 384, seed=seed, base=centres)
