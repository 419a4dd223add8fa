"""A reranker behind HTTP: the `/rerank` shape Cohere, Jina, vLLM, Infinity and llama.cpp share, or TEI's.

`cohere` style (the default) sends `{"model", "query", "documents", "top_n"}`
and reads `{"results": [{"index", "relevance_score"}]}`; `tei` style (Text
Embeddings Inference) sends `{"query", "texts", "truncate": true}` and reads
`[{"index", "score"}]`. Either reply shape is accepted whichever was sent.
`base_url` may name the endpoint itself (…/rerank) or its root, to which
`/rerank` is added. Requests go through `ragsieve.tools.http_json` (the chat
calls' retry and timeout rules), `batch_size` passages at a time; a reply must
score every passage once, with finite numbers, or it is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from ragsieve.tools.errors import ModelEndpointError, UsageError
from ragsieve.tools.http_json import JsonEndpoint

STYLES = ("cohere", "tei")
DEFAULT_KEY_ENV = "RAGSIEVE_RERANK_API_KEY"


class HTTPRerankProvider:
    kind = "http"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        style: str = "cohere",
        api_key: str | None = None,
        api_key_env: str | None = DEFAULT_KEY_ENV,
        batch_size: int = 32,
        timeout_s: float = 60.0,
        max_attempts: int = 5,
        max_retry_s: float = 150.0,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if style not in STYLES:
            raise UsageError(f"invalid rerank style {style!r}: choose one of {', '.join(STYLES)}")
        if batch_size < 1:
            raise UsageError(f"invalid rerank batch_size {batch_size!r}: must be >= 1")
        root = str(base_url or "").rstrip("/")
        url = root if root.endswith("/rerank") else f"{root}/rerank"
        key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._endpoint = JsonEndpoint(
            url,
            api_key=key,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            max_retry_s=max_retry_s,
            what="rerank endpoint",
            sleep=sleep,
        )
        self.model = model or ""
        self.style, self.batch_size = style, int(batch_size)

    def describe(self) -> str:
        return f"http {self._endpoint.shown}" + (f" (model {self.model})" if self.model else "")

    def load(self) -> None:
        """Nothing to load: the URL was checked when the provider was made (the first request proves the rest)."""

    def score(self, query: str, texts: list[str]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._batch(query, texts[start : start + self.batch_size]))
        return out

    def _batch(self, query: str, texts: list[str]) -> list[float]:
        if self.style == "tei":
            payload: dict = {"query": query, "texts": texts, "truncate": True}
        else:
            payload = {"query": query, "documents": texts, "top_n": len(texts)}
            if self.model:
                payload["model"] = self.model
        return self._scores(self._endpoint.post(payload), len(texts))

    def _scores(self, body: Any, n: int) -> list[float]:
        where = self.describe()
        items = body.get("results") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ModelEndpointError(f"rerank endpoint {where} replied without a results list")
        scores: dict[int, float] = {}
        for item in items:
            try:
                index = int(item["index"])
                value = float(item["relevance_score"] if "relevance_score" in item else item["score"])
            except (KeyError, TypeError, ValueError):
                raise ModelEndpointError(
                    f"rerank endpoint {where} returned a malformed result {str(item)[:200]!r}; "
                    f"expected {{index, relevance_score | score}}"
                ) from None
            if not 0 <= index < n or index in scores or not math.isfinite(value):
                raise ModelEndpointError(
                    f"rerank endpoint {where} returned index {index} (of {n} passages), a repeated index or a non-finite score"
                )
            scores[index] = value
        if len(scores) != n:
            raise ModelEndpointError(f"rerank endpoint {where} scored {len(scores)} of {n} passages")
        return [scores[i] for i in range(n)]
