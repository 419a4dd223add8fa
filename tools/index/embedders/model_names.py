"""The names an embedding model is recorded under (manifests, caches, ONNX export pointers)."""

from __future__ import annotations

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def canonical_model_name(name: str) -> str:
    """The name recorded in manifests: the short MiniLM alias maps to its full hub name."""
    return DEFAULT_MODEL if name == "all-MiniLM-L6-v2" else name
