"""Embedding: providers behind one small protocol (a local sentence-transformers model run by torch or ONNX
Runtime, or an OpenAI-compatible endpoint), the device a local one runs on, and what an index records about the
one that built it."""

from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
from ragsieve.tools.index.embedders.providers import (
    PROVIDERS,
    EmbeddingProvider,
    embedding_identity,
    embedding_record,
    known_dimension,
    mismatch,
    open_embedder,
    provider_of,
)

__all__ = [
    "PROVIDERS",
    "Embedder",
    "EmbeddingProvider",
    "OpenAIEmbedder",
    "embedding_identity",
    "embedding_record",
    "known_dimension",
    "mismatch",
    "open_embedder",
    "provider_of",
]
