"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, TEI, Ollama, llama.cpp, Infinity).

One POST per batch (`{"model", "input": [...], "encoding_format": "float"}`,
plus `dimensions` when set), through `ragsieve.tools.http_json.JsonEndpoint`:
the chat calls' retry, timeout and reply-size rules. Every reply is checked
before a vector is kept: one embedding per input (ordered by `index`), all of
one dimension — the one recorded in the index when there is one — and every
value finite; anything else is refused with a message naming the endpoint.

Two faults are answered instead of retried: a batch the server refuses as too
large (HTTP 413, or a 4xx naming the batch size) is split in half, and the
smaller size is kept for the rest of the run; inputs the server refuses as too
long are cut to half their length, at most `MAX_CUTS` times. Inputs are also
cut before sending to `max_input_tokens` x `CHARS_PER_TOKEN` characters (a
conservative estimate: English text averages about four characters per BPE
token), and `inputs_cut` counts every input shortened, so a build can say so.

`concurrency` requests are in flight at once (one TEI/vLLM server on a GPU is
kept busy only by several): the batches of one `embed` call go to a pool of
that many threads, at most twice that many queued, and come back in input order.
Each request keeps the rules above (retries of 429/5xx/timeouts by the
endpoint, the 413 split, the cut); a smaller batch size learnt by one request
applies to every batch sent after it. `stats` holds the rate reached.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from ragsieve.tools import tracing
from ragsieve.tools.errors import ModelEndpointError, UsageError
from ragsieve.tools.http_json import EndpointRejected, JsonEndpoint
from ragsieve.tools.index.search.dense import l2_normalise
from ragsieve.tools.tracing.conventions import embedding_after, embedding_before

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3
MAX_CUTS = 4
DEFAULT_KEY_ENV = "RAGSIEVE_EMBED_API_KEY"
_TOO_MANY = re.compile(r"batch|too many|inputs? (?:size|count|length) .*(?:exceed|maximum)|array too long|max_client", re.I)
_TOO_LONG = re.compile(
    r"too long|too large|maximum context|context length|tokens?\b.*(?:exceed|limit|maximum)|"
    r"exceeds? .*tokens?|input length",
    re.I,
)


def api_key_from_env(key_env: str | None, base_url: str) -> str | None:
    """The key in `key_env`; OPENAI_API_KEY only for api.openai.com (never sent to another host)."""
    key = os.environ.get(key_env) if key_env else None
    if not key and urlsplit(base_url).hostname == "api.openai.com":
        key = os.environ.get("OPENAI_API_KEY")
    return key or None


@dataclass
class EndpointStats:
    """What the endpoint did this run: texts embedded, requests sent, seconds inside `embed`, peak in flight."""

    texts: int = 0
    requests: int = 0
    seconds: float = 0.0
    peak_in_flight: int = 0

    @property
    def rate(self) -> float:
        """Texts per second while embedding (0 before any)."""
        return self.texts / self.seconds if self.seconds > 0 else 0.0


class OpenAIEmbedder:
    """The `openai` embedding provider: `embed(texts)` -> unit float32 rows."""

    provider: ClassVar[str] = "openai"
    encoder: ClassVar[str] = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = DEFAULT_KEY_ENV,
        batch_size: int = 64,
        dimensions: int | None = None,
        max_input_tokens: int | None = 8191,
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        max_retry_s: float = 300.0,
        sleep: Callable[[float], None] | None = None,
        concurrency: int = 1,
    ) -> None:
        if not model or not str(model).strip():
            raise UsageError("the openai embedding provider needs a model name (--embed-model / [index] embedding_model)")
        if batch_size < 1:
            raise UsageError(f"embedding batch_size must be >= 1, got {batch_size}")
        if dimensions is not None and dimensions < 1:
            raise UsageError(f"embedding dimensions must be >= 1, got {dimensions}")
        if not 1 <= concurrency <= 64:
            raise UsageError(f"embedding concurrency must be in 1..64 requests in flight, got {concurrency}")
        if max_input_tokens is not None and max_input_tokens < 1:
            raise UsageError(f"embedding max_input_tokens must be >= 1, got {max_input_tokens}")
        self.base_url = str(base_url or "").rstrip("/")
        self.name = str(model)
        self.api_key_env = api_key_env
        key = api_key if api_key is not None else api_key_from_env(api_key_env, self.base_url or "http://x")
        self._endpoint = JsonEndpoint(
            f"{self.base_url}/embeddings",
            api_key=key,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            max_retry_s=max_retry_s,
            what="embeddings endpoint",
            sleep=sleep,
        )
        self.batch_size = int(batch_size)
        self.dimensions = dimensions
        self.max_input_tokens = max_input_tokens
        self.max_chars = None if max_input_tokens is None else max_input_tokens * CHARS_PER_TOKEN
        self._dimension: int | None = dimensions
        self.inputs_cut = 0
        self.requests = 0
        self.concurrency = int(concurrency)
        self.stats = EndpointStats()
        self._lock = threading.Lock()  # counters and the learnt batch size, shared by the request threads
        self._in_flight = 0

    @property
    def known_dimension(self) -> int | None:
        """The dimension when known without a request (asked for, or seen in a reply)."""
        return self._dimension

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])  # a reply records the dimension
        if self._dimension is None:
            raise ModelEndpointError(f"{self.name}: the endpoint's reply gave no vector dimension")
        return int(self._dimension)

    def expect_dimension(self, dimension: int) -> None:
        """Refuse from now on any reply whose vectors are not `dimension` long (the index's)."""
        if self._dimension is not None and self._dimension != dimension:
            raise UsageError(
                f"embedding model {self.name!r} at {self._endpoint.shown} gives {self._dimension}-d "
                f"vectors; the index holds {dimension}-d vectors"
            )
        self._dimension = int(dimension)

    @property
    def placement(self) -> str:
        """For build summaries and traces: the endpoint and how many requests it had in flight."""
        return f"endpoint {self._endpoint.shown} ({self.concurrency} in flight)"

    def record(self) -> dict:
        """What the index manifest records about this provider (never the key itself)."""
        return {
            "provider": self.provider,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "dimensions": self.dimensions,
            "max_input_tokens": self.max_input_tokens,
        }

    @tracing.traced("ragsieve.embed", tracing.Kind.EMBEDDING, embedding_before, embedding_after)  # docs/tracing.md
    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """float32 array (len(texts), dimension), rows L2-normalised, in the order of `texts`."""
        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        t0 = time.perf_counter()
        limit = self.max_chars
        size = self.batch_size
        batches = [texts[s : s + size] for s in range(0, len(texts), size)]
        out: list[np.ndarray] = []
        if self.concurrency == 1:
            out = [self._send(b, limit) for b in batches]
        else:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="ragsieve-embed") as pool:
                pending: deque[Future] = deque()
                try:
                    for batch in batches:
                        if len(pending) >= 2 * self.concurrency:  # a bounded queue ahead of the requests
                            out.append(pending.popleft().result())
                        pending.append(pool.submit(self._send, batch, limit))
                    while pending:
                        out.append(pending.popleft().result())
                finally:
                    for future in pending:
                        future.cancel()
        with self._lock:
            self.stats.texts += len(texts)
            self.stats.seconds += time.perf_counter() - t0
        return l2_normalise(np.concatenate(out, axis=0))

    def _send(self, originals: list[str], limit: int | None) -> np.ndarray:
        """One batch's vectors: split first when a request learnt a smaller size since it was cut."""
        with self._lock:
            size = self.batch_size
        if len(originals) > size:
            return np.concatenate([self._send(originals[s : s + size], limit) for s in range(0, len(originals), size)])
        vectors, sent = self._embed_batch([t[:limit] if limit is not None else t for t in originals])
        cut = sum(1 for a, b in zip(originals, sent) if len(b) < len(a))
        with self._lock:
            self.inputs_cut += cut
        return vectors

    def _embed_batch(self, batch: list[str]) -> tuple[np.ndarray, list[str]]:
        """The batch's vectors and the texts as finally sent (split or cut when the server asked for it)."""
        cuts = 0
        while True:
            try:
                return self._request(batch), batch
            except EndpointRejected as exc:
                if len(batch) > 1 and (exc.status == 413 or _TOO_MANY.search(exc.detail)):
                    with self._lock:
                        self.batch_size = size = max(1, min(self.batch_size, len(batch) // 2))
                    log.warning(
                        "embeddings endpoint %s refused %d inputs at once; sending %d per request from now on",
                        self._endpoint.shown,
                        len(batch),
                        size,
                    )
                    parts, sent, start = [], [], 0
                    while start < len(batch):  # the size may shrink again on the way
                        vectors, part = self._embed_batch(batch[start : start + max(1, self.batch_size)])
                        parts.append(vectors)
                        sent.extend(part)
                        start += len(part)
                    return np.concatenate(parts), sent
                if _TOO_LONG.search(exc.detail) and cuts < MAX_CUTS and max(len(t) for t in batch) > 1:
                    cuts += 1
                    limit = max(1, max(len(t) for t in batch) // 2)
                    batch = [t[:limit] for t in batch]
                    log.warning(
                        "embeddings endpoint %s refused an input as too long; cut to %d characters", self._endpoint.shown, limit
                    )
                    continue
                raise

    def _request(self, batch: list[str]) -> np.ndarray:
        payload: dict = {"model": self.name, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        with self._lock:
            self.requests += 1
            self.stats.requests += 1
            self._in_flight += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self._in_flight)
        try:
            body = self._endpoint.post(payload)
        finally:
            with self._lock:
                self._in_flight -= 1
        with self._lock:  # the first reply sets the dimension; the others are checked against it
            return self._vectors(body, len(batch))

    def _vectors(self, body: Any, n: int) -> np.ndarray:
        where = f"embeddings endpoint {self._endpoint.shown} (model {self.name})"
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ModelEndpointError(f"{where} replied without a `data` list")
        if len(data) != n:
            raise ModelEndpointError(f"{where} returned {len(data)} embeddings for {n} inputs")
        try:
            items = sorted(data, key=lambda d: int(d.get("index", 0))) if all("index" in d for d in data) else data
            vectors = np.asarray([d["embedding"] for d in items], dtype=np.float64)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ModelEndpointError(
                f"{where} returned malformed embeddings ({type(exc).__name__}: {str(exc)[:200]}); expected lists of numbers"
            ) from None
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise ModelEndpointError(f"{where} returned embeddings of uneven or zero length")
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if bad.size:
            raise ModelEndpointError(
                f"{where} returned non-finite values (NaN or inf) for {bad.size} of {n} inputs "
                f"(first: input {int(bad[0])}); refusing to index them"
            )
        dim = int(vectors.shape[1])
        if self._dimension is None:
            self._dimension = dim
        elif dim != self._dimension:
            raise ModelEndpointError(
                f"{where} returned {dim}-d vectors; expected {self._dimension}-d "
                f"(the dimension asked for or recorded in the index)"
            )
        return vectors.astype(np.float32)

    def close(self) -> None:
        self._endpoint.close()
