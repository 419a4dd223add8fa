"""Embed queries with an exported ONNX encoder, without importing torch or sentence-transformers.

`ragsieve search` spent most of its time importing sentence-transformers (and torch, transformers,
scikit-learn under it) to embed one query: 18.8 s of a 23.6 s call on a busy 2-core machine (issue 44
item 6). Once `onnx_encoder.OnnxEncoder` has exported a model (at the first index build with the `onnx`
or `onnx-int8` encoder), the export folder holds everything a query needs: the graph (transformer, mean
pooling and L2 normalisation), the fast tokenizer's `tokenizer.json`, and a pointer from the model's name
to the folder (`write_pointer`). `OnnxQueryEmbedder.find` opens them with `tokenizers` and ONNX Runtime
only; it gives the same vectors as the `Embedder` that built the index (the same graph and tokenizer
settings: truncation at the model's `max_seq_length`, each text run alone without padding).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ragsieve.tools import tracing
from ragsieve.tools.tracing.conventions import embedding_after, embedding_before

ENCODERS = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}
PROVIDER = "sentence-transformers"


def cache_dir() -> Path:
    """Where ONNX exports live: `~/.cache/ragsieve/onnx` (`RAGSIEVE_CACHE` moves it)."""
    return Path(os.environ.get("RAGSIEVE_CACHE") or Path.home() / ".cache" / "ragsieve") / "onnx"


def _pointer_path(name: str) -> Path:
    return cache_dir() / "exports" / f"{hashlib.sha1(name.encode()).hexdigest()[:16]}.json"


def write_pointer(name: str, folder: Path, *, max_length: int, dimension: int, pad_id: int, pad_token: str) -> None:
    """Record (atomically) that model `name` is exported in `folder`, with its tokenizer settings."""
    path = _pointer_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "name": name,
        "folder": folder.name,
        "max_length": max_length,
        "dimension": dimension,
        "pad_id": pad_id,
        "pad_token": pad_token,
    }
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


class OnnxQueryEmbedder:
    """The `Embedder` interface (name, dimension, encoder, embed) over an existing ONNX export."""

    provider = PROVIDER

    def __init__(self, name: str, encoder: str, folder: Path, record: dict) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name, self.encoder = name, encoder
        self.dimension = int(record["dimension"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(record["max_length"]))
        self.tokenizer.no_padding()  # each text runs alone (see `embed`)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1  # one short query: threads cost more than they save
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(folder / ENCODERS[encoder]), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    @classmethod
    def find(cls, name: str, encoder: str) -> "OnnxQueryEmbedder | None":
        """The embedder for model `name` run by `encoder` (`onnx` / `onnx-int8`) when it was exported and
        onnxruntime and tokenizers are installed; None otherwise (the caller loads the full `Embedder`)."""
        if encoder not in ENCODERS:
            return None
        try:
            record = json.loads(_pointer_path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        folder = cache_dir() / str(record.get("folder", ""))
        if record.get("name") != name or not (folder / ENCODERS[encoder]).is_file() or not (folder / "tokenizer.json").is_file():
            return None
        try:
            return cls(name, encoder, folder, record)
        except (ImportError, OSError, ValueError, KeyError, RuntimeError):
            return None  # a missing package or an unreadable export: the full embedder will do

    @tracing.traced("ragsieve.embed", tracing.Kind.EMBEDDING, embedding_before, embedding_after)  # docs/tracing.md
    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """float32 array (len(texts), dimension), rows L2-normalised (the graph normalises). Each text runs
        alone, unpadded, as `OnnxEncoder` runs it: int8 activations are quantised per input tensor, so a text's
        vector must not depend on the texts beside it (`tests/core/test_encoder_determinism.py`)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, encoding in enumerate(self.tokenizer.encode_batch(list(texts))):
            feed = {
                "input_ids": np.asarray([encoding.ids], dtype=np.int64),
                "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
                "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64),
            }
            out[i] = self.session.run(None, {n: feed[n] for n in self.inputs})[0][0]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)
