"""The embedding-provider protocol, the manifest record of a provider, and opening one from that record.

Two providers share the protocol: `sentence-transformers`
(`ragsieve.tools.index.search.dense.Embedder`: any model name or local folder, the
packaged MiniLM offline by default; its `encoder` — torch, onnx, onnx-int8 —
is one setting of the provider) and `openai` (`OpenAIEmbedder`: any
OpenAI-compatible `/v1/embeddings`). An index records which one built it
(`embedding` in the manifest: provider, model, dimension, encoder and, for an
endpoint, its base URL and the *name* of the variable holding the key); the
index then embeds queries the same way, and a different provider, model or
dimension is refused, never mixed into one index.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.model_names import canonical_model_name
from ragsieve.tools.index.embedders.onnx_query import OnnxQueryEmbedder
from ragsieve.tools.index.embedders.openai_embedder import DEFAULT_KEY_ENV, OpenAIEmbedder

log = logging.getLogger(__name__)
PROVIDERS = ("sentence-transformers", "openai")
DEFAULT_PROVIDER = "sentence-transformers"
BASE_URL_ENV = "RAGSIEVE_EMBED_BASE_URL"  # where an index's endpoint moved to (queries only)


@runtime_checkable
class EmbeddingProvider(Protocol):
    """`name` (the model), `encoder`, `dimension`, and `embed(texts)` -> unit float32 rows."""

    name: str
    encoder: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray: ...


def provider_of(embedder: Any) -> str:
    return getattr(embedder, "provider", DEFAULT_PROVIDER)


def embedding_record(embedder: Any, dimension: int) -> dict:
    """The manifest's `embedding` section for vectors of `dimension` made by `embedder`."""
    record = {
        "provider": provider_of(embedder),
        "model": canonical_model_name(embedder.name),
        "dimension": int(dimension),
        "encoder": embedder.encoder,
    }
    extra = getattr(embedder, "record", None)
    return record | (extra() if callable(extra) else {})


def embedding_identity(record: dict) -> str:
    """`provider:model:dimension[:int8]`: what decides the embedding space (calibrations are valid within one)."""
    precision = ":int8" if record.get("encoder") == "onnx-int8" else ""
    return f"{record.get('provider', DEFAULT_PROVIDER)}:{record.get('model')}:{record.get('dimension', '?')}{precision}"


def known_dimension(embedder: Any) -> int | None:
    """The provider's dimension when known without a request (a loaded local model always knows it)."""
    if embedder is None:
        return None
    return embedder.known_dimension if hasattr(embedder, "known_dimension") else int(embedder.dimension)


def mismatch(record: dict, provider: str, model: str, dimension: int | None = None) -> str | None:
    """Why vectors of `provider`/`model`/`dimension` cannot join (or query) an index whose manifest records
    `record`; None when they can."""
    have = (record.get("provider", DEFAULT_PROVIDER), record.get("model"))
    given = (provider, canonical_model_name(model))
    if have != given:
        return f"it was built with {have[1]!r} ({have[0]}), not {given[1]!r} ({given[0]})"
    if dimension is not None and record.get("dimension") not in (None, dimension):
        return f"it holds {record['dimension']}-d vectors; {given[1]!r} gives {dimension}-d vectors"
    return None


def open_embedder(record: dict, *, batch_size: int = 64, device: str = "auto", **endpoint: Any) -> Any:
    """The provider that embeds like the index whose manifest records `record` (queries, new chunks), a local
    model on `device` (`ragsieve.tools.index.embedders.device`: an fp16 index on a CPU-only machine runs in fp32 there).

    `endpoint` options (timeout_s, max_attempts, max_retry_s, api_key, sleep) reach the `openai` provider;
    the base URL is the recorded one unless RAGSIEVE_EMBED_BASE_URL names where the endpoint moved."""
    provider = record.get("provider", DEFAULT_PROVIDER)
    if provider == DEFAULT_PROVIDER:
        encoder = record.get("encoder", "torch")
        light = OnnxQueryEmbedder.find(record["model"], encoder)
        if light is not None:  # an exported ONNX encoder: no torch or sentence-transformers import
            return light

        local = Embedder(record["model"], batch_size=batch_size, encoder=encoder, device=device)
        if local.encoder == "torch-fp16" and local.precision != "fp16":
            log.info("index embedded in fp16 on a GPU; %s", local.placement)  # the manifest check's note
        return local
    if provider == "openai":
        base_url = os.environ.get(BASE_URL_ENV) or record.get("base_url")
        if not base_url:
            raise UsageError(f"the index was embedded by an endpoint whose URL it does not record; set {BASE_URL_ENV}")
        embedder = OpenAIEmbedder(
            base_url,
            record["model"],
            api_key_env=record.get("api_key_env", DEFAULT_KEY_ENV),
            batch_size=batch_size,
            dimensions=record.get("dimensions"),
            max_input_tokens=record.get("max_input_tokens"),
            **endpoint,
        )
        if record.get("dimension"):
            embedder.expect_dimension(int(record["dimension"]))
        return embedder
    raise UsageError(
        f"the index was embedded by provider {provider!r}, which this ragsieve does not know (known: {', '.join(PROVIDERS)})"
    )


def placement_of(embedder: Any) -> str:
    """What embeds queries, for the trace: `<encoder> on <device>` for a local model, else the provider."""
    if isinstance(embedder, (Embedder, OpenAIEmbedder)):
        return embedder.placement
    return f"{provider_of(embedder)} ({embedder.encoder})"
