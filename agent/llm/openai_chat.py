"""`ChatModel` over any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, the embedded server).

Transport faults (429, 5xx, connect timeouts, refused connections) are retried
with bounded exponential backoff and full jitter (`ragsieve.agent.llm.retrying`).
Structured output uses `response_format` json_schema (strict), or
json_object, or a schema described in the prompt; `auto` downgrades in that
order when the server rejects a format, and remembers what works.

Every reply body is read by this module, chunk by chunk, so that a question's
`deadline` (absolute `time.monotonic()` value) bounds the whole call — the
wait, each retry's sleep and a body trickling in byte by byte — and a body
over `max_reply_bytes` is refused instead of held in memory. A plain call may
take `timeout_s`; with `adaptive_timeouts` (the embedded server) it may take
what the measured prompt-processing and generation rates predict for its
prompt and `max_tokens` (times a margin) when that is longer; a streamed call
is cut by inactivity, not by the clock (`ragsieve.agent.llm.deadlines`). A call
cut by one of these limits (`SlowReply`, `streaming.NoFirstToken`), or whose
server accepted it and then stayed silent past the read timeout, is not sent
again: the server was working on it. A body that is
not JSON is retried like a transport fault, then reported in one line. The
URL's password and the API key never appear in a message.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable
from urllib.parse import urlparse

import openai

from ragsieve.agent.errors import BudgetExceeded, LLMError, UsageError
from ragsieve.agent.llm.chat import ChatReply
from ragsieve.agent.llm.deadlines import RateMeter
from ragsieve.agent.llm.redact import redact_url
from ragsieve.agent.llm.replies import MalformedReply, OutputMode, ReplyTooLarge, SlowReply, rejected
from ragsieve.agent.llm.replies import describe as _describe
from ragsieve.agent.llm.retrying import call_with_retries
from ragsieve.agent.llm.streaming import stream_completion
from ragsieve.agent.llm.wire import chat_reply, chat_request, retry_after_s, strict_schema

__all__ = ["OpenAIChat", "OutputMode", "MalformedReply", "ReplyTooLarge", "SlowReply", "retry_after_s", "strict_schema"]
from ragsieve.tools.ingest.chunking import count_tokens
from ragsieve.tools.modes import parse_enum

log = logging.getLogger(__name__)

_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema")


_DOWNGRADE = [OutputMode.JSON_SCHEMA, OutputMode.JSON_OBJECT, OutputMode.TEXT]


class OpenAIChat:
    """One chat completion per `complete` call, retried on transport faults.

    `model` None asks the server (`GET /models`) and uses the first id.
    `sleep` replaces `time.sleep` between retries (tests record the waits)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str | None,
        *,
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        max_retry_s: float = 300.0,
        output_mode: str | OutputMode = "auto",
        sleep: Callable[[float], None] | None = None,
        max_reply_bytes: int = 4_000_000,
        adaptive_timeouts: bool = False,
    ) -> None:
        if not base_url or not str(base_url).startswith(("http://", "https://")):
            raise UsageError(f"invalid LLM base_url {redact_url(str(base_url))!r}: expected an http:// or https:// URL")
        if timeout_s <= 0:
            raise UsageError(f"invalid timeout_s {timeout_s!r}: must be > 0")
        if max_attempts < 1:
            raise UsageError(f"invalid max_attempts {max_attempts!r}: must be >= 1")
        if max_retry_s <= 0:
            raise UsageError(f"invalid max_retry_s {max_retry_s!r}: must be > 0")
        if max_reply_bytes < 1024:
            raise UsageError(f"invalid max_reply_bytes {max_reply_bytes!r}: must be >= 1024")
        self.max_reply_bytes = int(max_reply_bytes)
        self.adaptive_timeouts = bool(adaptive_timeouts)
        self.rates = RateMeter()  # measured on every reply; used for time limits when adaptive_timeouts
        self.base_url = str(base_url).rstrip("/")
        self.shown_url = redact_url(self.base_url)  # what messages and cache keys name
        self._api_key = api_key
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.max_retry_s = float(max_retry_s)
        self.output_mode = parse_enum(OutputMode, output_mode, "output_mode")
        self._mode: OutputMode = OutputMode.JSON_SCHEMA if self.output_mode is OutputMode.AUTO else self.output_mode
        self._sleep = sleep if sleep is not None else time.sleep
        self._lock = threading.Lock()
        self._model = model
        loopback = urlparse(self.base_url).hostname in ("127.0.0.1", "localhost", "::1")
        self._client = openai.OpenAI(  # a loopback server is never reached through an HTTP proxy
            base_url=self.base_url,
            api_key=api_key or "not-needed",
            timeout=self.timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(trust_env=False) if loopback else None,
        )

    # ------------------------------------------------------------------ public
    @property
    def model_name(self) -> str:
        with self._lock:
            if self._model is None:
                self._model = self._discover_model()
            return self._model

    @property
    def current_mode(self) -> OutputMode:
        """The structured-output mode in use now (after any `auto` downgrade)."""
        return self._mode

    accepts_deadline = True  # `LLM` passes the question's deadline to `complete`

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What, besides the request, decides a reply: the endpoint (password masked) and output mode."""
        return {"endpoint": self.shown_url, "output_mode": self._mode.value}

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
        max_tokens: int | None = None,
        temperature: float | None = None,
        deadline: float | None = None,
    ) -> ChatReply:
        model = self.ensure_model(deadline)
        started = time.monotonic()
        while True:
            mode = self._mode
            kwargs = self._request(model, messages, json_schema, schema_name, mode, max_tokens, temperature)
            try:
                body = self._call(lambda: self._post(kwargs, deadline), model, deadline)  # noqa: B023
            except openai.BadRequestError as exc:
                if self._downgrade(mode, exc, json_schema is not None):
                    continue
                raise rejected(self.shown_url, model, exc) from exc
            except openai.APIStatusError as exc:
                raise rejected(self.shown_url, model, exc) from exc
            latency = time.monotonic() - started
            self.rates.observe_reply(body, latency)
            return chat_reply(body, self.shown_url, model, latency)

    def stream(
        self,
        messages: list[dict[str, str]],
        *,
        on_token: Callable[[str], None],
        max_tokens: int | None = None,
        temperature: float | None = None,
        deadline: float | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ChatReply:
        """Plain-text completion streamed token by token (`ragsieve.agent.llm.streaming`)."""
        return stream_completion(
            self,
            messages,
            on_token=on_token,
            max_tokens=max_tokens,
            temperature=temperature,
            deadline=deadline,
            should_stop=should_stop,
        )

    def refuse_ragsieve(self, headers: Mapping[str, str]) -> None:
        """A ragsieve server (it sends `x-ragsieve-server`) is never used as the model: with OPENAI_BASE_URL
        pointing at `ragsieve serve` (natural for its SDK users) `ask` would answer from another pipeline."""
        if headers is not None and headers.get("x-ragsieve-server"):
            raise UsageError(
                f"the LLM endpoint {self.shown_url} is a ragsieve server (version "
                f"{headers.get('x-ragsieve-server')}), not a model: ragsieve cannot use it as its LLM. "
                f"Point llm.base_url (or RAGSIEVE_BASE_URL, which takes precedence over "
                f"OPENAI_BASE_URL) at the LLM's own endpoint, or unset them for the embedded model"
            )

    def call_timeout(self, prompt_tokens: int, max_tokens: int) -> float:
        """How long one silent (non-streamed) call may take: `timeout_s`, or the measured rates' prediction."""
        if not self.adaptive_timeouts:
            return self.timeout_s
        return self.rates.call_timeout(prompt_tokens, max_tokens, self.timeout_s)

    def first_event_timeout(self, prompt_tokens: int) -> float:
        """How long a stream may wait for its first event (the prompt is processed first)."""
        return self.call_timeout(prompt_tokens, 1)

    def ensure_model(self, deadline: float | None = None) -> str:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._discover_model(deadline)
        return self._model

    # ----------------------------------------------------------------- helpers
    def _discover_model(self, deadline: float | None = None) -> str:
        def listing() -> Any:
            timeout = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
            if timeout <= 0:
                raise BudgetExceeded("deadline per question reached before the model list was read")
            raw = self._client.models.with_raw_response.list(timeout=timeout)
            self.refuse_ragsieve(raw.headers)
            return raw.parse()

        page = self._call(listing, "<discovering>", deadline)
        ids = [m.id for m in getattr(page, "data", []) or []]
        if not ids:
            raise LLMError(f"LLM endpoint {self.shown_url} lists no models; set the model name explicitly")
        return ids[0]

    def _post(self, kwargs: dict[str, Any], deadline: float | None) -> dict[str, Any]:
        """One chat request; the body read in chunks under the deadline and the size bound, then parsed."""
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) for m in kwargs["messages"])
        limit = self.call_timeout(prompt_tokens, int(kwargs.get("max_tokens") or 512))
        timeout = limit
        call_ends = time.monotonic() + limit  # the limit bounds the whole call, not only each read
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BudgetExceeded("deadline per question reached before an LLM call")
            timeout = min(timeout, remaining)
        chunks, size = [], 0
        with self._client.chat.completions.with_streaming_response.create(**kwargs, timeout=timeout) as response:
            self.refuse_ragsieve(response.headers)
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise ReplyTooLarge(
                        f"LLM endpoint {self.shown_url} sent a reply over max_reply_bytes={self.max_reply_bytes}; stopped reading"
                    )
                if deadline is not None and time.monotonic() >= deadline:
                    raise BudgetExceeded(f"deadline per question reached while reading the reply ({size} bytes in)")
                if time.monotonic() >= call_ends:
                    raise SlowReply(
                        f"reply not complete after {limit:g}s (timeout_s={self.timeout_s:g}"
                        f"{', adapted to the measured model speed' if limit > self.timeout_s else ''}; "
                        f"{size} bytes in)"
                    )
                chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MalformedReply(
                f"reply body is not JSON ({type(exc).__name__} at byte "
                f"{getattr(exc, 'pos', getattr(exc, 'start', '?'))}, {len(raw)} bytes)"
            ) from None
        if not isinstance(body, dict):
            raise MalformedReply(f"reply body is JSON {type(body).__name__}, not an object")
        return body

    def _call(self, fn: Callable[[], Any], model: str, deadline: float | None = None) -> Any:
        return call_with_retries(
            fn,
            shown_url=self.shown_url,
            model=model,
            deadline=deadline,
            max_attempts=self.max_attempts,
            max_retry_s=self.max_retry_s,
            sleep=self._sleep,
        )

    def _downgrade(self, mode: OutputMode, exc: openai.APIStatusError, structured: bool) -> bool:
        if self.output_mode is not OutputMode.AUTO or not structured or mode is OutputMode.TEXT:
            return False
        text = f"{exc.message} {exc.body}".lower()
        if not any(word in text for word in _FORMAT_WORDS):
            return False
        with self._lock:
            if self._mode is mode:
                self._mode = _DOWNGRADE[_DOWNGRADE.index(mode) + 1]
                log.warning(
                    "LLM endpoint %s rejected response_format %s (%s); using %s from now on",
                    self.shown_url,
                    mode.value,
                    _describe(exc),
                    self._mode.value,
                )
        return True

    def _request(
        self,
        model: str,
        messages: list[dict[str, str]],
        json_schema: dict[str, Any] | None,
        schema_name: str,
        mode: Any,
        max_tokens: int | None,
        temperature: float | None,
    ) -> dict[str, Any]:
        return chat_request(model, messages, json_schema, schema_name, mode, max_tokens, temperature)
