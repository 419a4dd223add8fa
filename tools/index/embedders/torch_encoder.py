"""The sentence-transformers model run so that the device never waits on the tokenizer.

Plain `SentenceTransformer.encode` tokenizes a batch, runs it, tokenizes the
next: on a GPU the model waits on one CPU core for every batch (issue 47: the
H100 run was tokenizer-bound). Here batches are cut from the texts sorted by
length (less padding), tokenized by a pool of threads — each with its own copy
of the tokenizer, whose padding/truncation state is not thread-safe — at most
`prefetch` batches ahead of the model (a bounded queue), and run by the model in
the calling thread; the vectors go back to the texts' order. Tokenization is
the model's own (`max_seq_length`, truncation, padding), as the ONNX encoder
does, and the model is the whole sentence-transformers pipeline (transformer,
pooling, normalisation), so the vectors equal `encode`'s to float precision
(`tests/core/test_device.py`). `busy_s` adds up the seconds the model ran.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np


class TorchEncoder:
    def __init__(
        self, st_model: Any, device: str, batch_size: int = 64, tokenizers: int | None = None, prefetch: int = 4
    ) -> None:
        self.model = st_model
        self.device = device
        self.tokenizer = st_model[0].tokenizer
        self.max_length = int(st_model.max_seq_length)
        self.batch_size = int(batch_size)
        self.prefetch = max(1, int(prefetch))
        self.workers = max(1, min(8, tokenizers or (os.cpu_count() or 1)))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ragsieve-tokenize")
        self._local = threading.local()
        self.busy_s = 0.0

    def _tokenize(self, texts: list[str]) -> dict:
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        return dict(
            tokenizer([t.strip() for t in texts], padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit float32 rows of `texts`, in their order."""
        import torch

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        batches = [order[s : s + self.batch_size] for s in range(0, len(texts), self.batch_size)]
        pending: list[Future] = []
        out: np.ndarray | None = None
        with torch.inference_mode():
            for i, idx in enumerate(batches):
                while len(pending) < self.prefetch and i + len(pending) < len(batches):  # a bounded queue
                    ahead = batches[i + len(pending)]
                    pending.append(self._pool.submit(self._tokenize, [texts[j] for j in ahead]))
                features = {k: v.to(self.device, non_blocking=True) for k, v in pending.pop(0).result().items()}
                t0 = time.perf_counter()
                vectors = self.model(features)["sentence_embedding"].float().cpu().numpy()
                self.busy_s += time.perf_counter() - t0
                if out is None:
                    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                out[idx] = vectors
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
