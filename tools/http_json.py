"""One JSON POST to a model endpoint (embeddings, rerank), retried by the same rules as the chat calls.

Transport faults (429, 5xx, timeouts, refused connections, a body that is not
JSON) are retried by tenacity with exponential backoff and full jitter (AWS
Architecture Blog, "Exponential Backoff and Jitter", 2015: sleep =
U(0, min(cap, base * 2**n))), honouring `Retry-After` / `retry-after-ms`;
attempts and total time are both bounded, `timeout_s` bounds each attempt in
all (a body trickling in byte by byte included) and a body over
`max_reply_bytes` is refused. Other 4xx replies are not retried: they raise
`EndpointRejected` carrying the status and the server's message, so a caller
can react (split a batch that was too large, cut inputs that were too long).
An API key is sent as a bearer token and never appears in a message.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import time
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import httpx
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from ragsieve.tools.errors import ModelEndpointError, UsageError

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
_SECRET_IN_TEXT = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}")


def retry_after_s(headers: Any) -> float | None:
    """Seconds asked by `retry-after-ms` or `Retry-After` (delta-seconds or HTTP date), else None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def shown_url(url: str) -> str:
    """`url` with any password in its user-info masked (what messages name)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class TransientFault(ModelEndpointError):
    """A fault worth another attempt (429, 5xx, timeout, connection, unreadable body)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EndpointRejected(ModelEndpointError):
    """The endpoint answered 4xx (not 429): the same request would fail again."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class JsonEndpoint:
    """POSTs JSON to one URL with bounded retries; `sleep` replaces `time.sleep` (tests record waits)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        max_retry_s: float = 300.0,
        max_reply_bytes: int = 64_000_000,
        what: str = "model endpoint",
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if not url or not str(url).startswith(("http://", "https://")):
            raise UsageError(f"invalid {what} URL {str(url)!r}: expected an http:// or https:// URL")
        for name, value, low in (("timeout_s", timeout_s, 0), ("max_retry_s", max_retry_s, 0)):
            if not value > low:
                raise UsageError(f"invalid {what} {name} {value!r}: must be > {low}")
        if max_attempts < 1:
            raise UsageError(f"invalid {what} max_attempts {max_attempts!r}: must be >= 1")
        self.url, self.what = str(url), what
        self.shown = shown_url(self.url)
        self.timeout_s, self.max_attempts, self.max_retry_s = float(timeout_s), int(max_attempts), float(max_retry_s)
        self.max_reply_bytes = int(max_reply_bytes)
        self._api_key = api_key
        self._sleep = sleep if sleep is not None else time.sleep
        loopback = urlsplit(self.url).hostname in ("127.0.0.1", "localhost", "::1")
        self._client = httpx.Client(timeout=self.timeout_s, trust_env=not loopback)  # loopback: never via a proxy

    def post(self, payload: dict[str, Any]) -> Any:
        """The parsed JSON reply; raises ModelEndpointError after the retries, EndpointRejected on a 4xx."""
        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts) | stop_after_delay(self.max_retry_s),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, TransientFault)),
            sleep=self._sleep,
            reraise=False,
            before_sleep=lambda s: log.warning(
                "%s %s attempt %d failed (%s); retrying",
                self.what,
                self.shown,
                s.attempt_number,
                s.outcome.exception() if s.outcome else None,
            ),
        )
        started = time.monotonic()
        try:
            return retrying(lambda: self._once(payload))
        except RetryError as exc:
            attempt = exc.last_attempt
            raise ModelEndpointError(
                f"{self.what} {self.shown} failed after {attempt.attempt_number} attempt(s) in "
                f"{time.monotonic() - started:.1f}s (limits: {self.max_attempts} attempts, {self.max_retry_s:g}s); "
                f"last error: {attempt.exception()}"
            ) from None

    def _once(self, payload: dict[str, Any]) -> Any:
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        ends = time.monotonic() + self.timeout_s
        try:
            with self._client.stream("POST", self.url, json=payload, headers=headers) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_reply_bytes:
                        raise ModelEndpointError(
                            f"{self.what} {self.shown} sent a reply over {self.max_reply_bytes} bytes; stopped reading"
                        )
                    if time.monotonic() >= ends:
                        raise TransientFault(f"reply not complete after timeout_s={self.timeout_s:g}s ({size} bytes in)")
                    chunks.append(chunk)
                status, reply_headers = response.status_code, response.headers
        except httpx.TimeoutException as exc:
            raise TransientFault(f"timeout after {self.timeout_s:g}s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise TransientFault(f"{type(exc).__name__}: {self._clean(str(exc))[:300]}") from None
        raw = b"".join(chunks)
        if status == 429 or status >= 500:
            raise TransientFault(
                f"HTTP {status}: {self._clean(raw[:300].decode('utf-8', 'replace'))}", retry_after_s(reply_headers)
            )
        if status >= 400:
            detail = self._clean(raw[:2000].decode("utf-8", "replace"))
            raise EndpointRejected(
                f"{self.what} {self.shown} rejected the request: HTTP {status}: {detail[:500]}", status, detail
            )
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TransientFault(f"reply body is not JSON ({type(exc).__name__}, {len(raw)} bytes)") from None

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        remaining = max(0.0, self.max_retry_s - (state.seconds_since_start or 0.0))
        asked = getattr(exc, "retry_after", None)
        if asked is not None:
            return min(asked, remaining)
        ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (state.attempt_number - 1))
        return min(random.uniform(0.0, ceiling), remaining)

    def _clean(self, text: str) -> str:
        text = _SECRET_IN_TEXT.sub(lambda m: m.group(1) + "***", text)
        return text.replace(self._api_key, "***") if self._api_key and len(self._api_key) >= 4 else text

    def close(self) -> None:
        self._client.close()
