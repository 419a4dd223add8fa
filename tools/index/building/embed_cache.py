"""Embeddings checkpointed per chunk text, so a killed build resumes where it stopped.

An SQLite table beside the index's generations (`<index>/embeddings.sqlite`)
maps (model, sha1 of the indexed text) to the float32 vector; the model column
names the encoder variant too (`cache_model`), so int8 vectors never stand in
for fp32 ones or the reverse. The builder looks
every text up before embedding, embeds only the missing ones and commits each
batch as it is done. After a successful build the cache keeps only the texts
of the published generation (`prune`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, key))"
)


def cache_model(model: str, encoder: str | None) -> str:
    """The cache's model column for `model` embedded by `encoder`. `torch` and `onnx` compute the same fp32
    vectors (cosine 1.000 to torch, `benchmarks/results/scale.json`) and keep the bare model name, as caches
    written before this had; `onnx-int8` (quantised weights, cosine >= 0.990) is its own variant `<model>#int8-alone`
    and `torch-fp16` (half precision on a GPU) `<model>#fp16`. `-alone`: each text embedded by itself
    (`onnx_encoder`); vectors cached as `#int8` came from batches, where a text's int8 vector depended on its
    neighbours, so they are not reused: an older index re-embeds once."""
    return {"onnx-int8": f"{model}#int8-alone", "torch-fp16": f"{model}#fp16"}.get(encoder or "", model)


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: str | Path, model: str, dimension: int | None = None) -> None:
        self.path, self.model, self.dimension = Path(path), model, dimension
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute(_SCHEMA)

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._db.execute(
                f"SELECT key, vector FROM vectors WHERE model = ? AND key IN ({marks})", [self.model, *part]
            ):
                vector = np.frombuffer(blob, dtype=np.float32)
                if self.dimension is None or vector.shape[0] == self.dimension:
                    found[key] = vector
        return found

    def put_many(self, keys: list[str], vectors: np.ndarray) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
            [(self.model, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors)],
        )
        self._db.commit()

    def prune(self, keep: set[str]) -> int:
        """Delete the vectors of texts not in `keep` (this model's); returns how many were deleted."""
        rows = [k for (k,) in self._db.execute("SELECT key FROM vectors WHERE model = ?", (self.model,)) if k not in keep]
        self._db.executemany("DELETE FROM vectors WHERE model = ? AND key = ?", [(self.model, k) for k in rows])
        self._db.execute("DELETE FROM vectors WHERE model != ?", (self.model,))
        self._db.commit()
        return len(rows)

    def forget(self, keys: set[str]) -> int:
        """Delete the vectors of these texts (an incremental build's removed chunks): O(k), not O(cache)."""
        self._db.executemany("DELETE FROM vectors WHERE model = ? AND key = ?", [(self.model, k) for k in keys])
        self._db.commit()
        return len(keys)

    def close(self) -> None:
        self._db.close()


def step_factor(embedder: object) -> int:
    """How many times four batches one checkpointed step holds: one per request an embeddings endpoint keeps in
    flight, four on a GPU (its batches are large and quick: a step's SQLite write and the refill of the
    tokenizers' queue are paid less often), else one."""
    if isinstance(embedder, OpenAIEmbedder):
        return embedder.concurrency
    return 4 if isinstance(embedder, Embedder) and embedder.placed.gpu else 1


def embed_resumable(
    cache: EmbeddingCache,
    texts: list[str],
    rows: list[int],
    vectors: np.ndarray,
    embed: Callable[[list[str]], np.ndarray],
    step: int,
    reporter: Callable[[int], Callable[[int | None], None]],
) -> int:
    """Fill `vectors[rows]` with the embeddings of `texts[rows]`: those in `cache` (embedded by a build that
    was stopped) are not embedded again; the rest go to `embed` longest first (less padding per batch), `step`
    at a time, each batch checkpointed in `cache` as it is done. `reporter(total)` gives the progress callback.
    Returns how many came from the cache."""
    keys = {r: text_key(texts[r]) for r in rows}
    cached = cache.get_many(sorted(set(keys.values())))
    for r in rows:
        if keys[r] in cached:
            vectors[r] = cached[keys[r]]
    missing = sorted((r for r in rows if keys[r] not in cached), key=lambda r: -len(texts[r]))
    report = reporter(len(missing))
    report(0)
    for s in range(0, len(missing), step):
        batch = missing[s : s + step]
        vectors[batch] = embed([texts[r] for r in batch])
        cache.put_many([keys[r] for r in batch], vectors[batch])  # the checkpoint
        report(min(s + step, len(missing)))
    report(None)
    return len(rows) - len(missing)


def keep_live(cache: EmbeddingCache, last_keys: set[str] | None, gone_keys: set[str]) -> None:
    """After a build went live, keep (and close) the checkpoint of what the live index holds: the build's
    keys (`last_keys`), or without them (an incremental build) all but the texts it removed."""
    try:
        if last_keys is None:
            cache.forget(gone_keys)
        else:
            cache.prune(last_keys)
    finally:
        cache.close()
