"""How the Milvus publish tests read an index: opened with the hash embedder, a local snapshot, the `version N`
marks each document shows a reader, and its document ids."""

from __future__ import annotations

from ragsieve.tools.index.engines.open import open_index
from ragsieve.tools.index.local.index import HybridIndex
from tests.core.test_stable_rows import HashEmbedder, snapshot


def opened(index):
    return open_index(index, embedder=HashEmbedder())


def local_snapshot(index):
    with HybridIndex.open(index, embedder=HashEmbedder()) as local:
        return snapshot(local)


def versions_seen(index, doc_ids) -> dict[str, set[str]]:
    """Per document, the `version N` marks of its chunks as one reader sees them."""
    with opened(index) as idx:
        out = {}
        for doc in doc_ids:
            chunks = idx.store.chunks_of(doc)
            out[doc] = {c.text.split("version ")[1].split(".")[0] for c in chunks} | {f"n={len(chunks)}"}
        return out


def document_ids(index) -> list[str]:
    with opened(index) as idx:
        return sorted(idx.store.documents())
