"""HTTP client for the Lumen API with retries: honours Retry-After on 429, backs off on 5xx."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from typing import Any, Callable

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REGION_HOSTS = {
    "us-east": "https://api.lumen.example",
    "eu-west": "https://eu.api.lumen.example",
    "ap-south": "https://ap.api.lumen.example",
}


class LumenError(Exception):
    """An API call failed; `status` and `code` come from the response when there was one."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code


def backoff_delay(attempt: int, base: float = 0.5, cap: float = 30.0, retry_after: str | None = None) -> float:
    """Seconds to wait before retry number `attempt` (1-based).

    A numeric Retry-After header wins; otherwise "full jitter" exponential
    backoff: a random delay in [0, min(cap, base * 2**(attempt-1))].
    """
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            pass
    return random.uniform(0.0, min(cap, base * 2 ** (attempt - 1)))


class LumenClient:
    """Minimal JSON client: `client.request("GET", "/v1/whoami")`."""

    def __init__(
        self,
        api_key: str,
        *,
        region: str = "us-east",
        timeout: float = 30.0,
        max_retries: int = 4,
        sleep: Callable[[float], None] = time.sleep,
        opener: Callable[..., Any] = urllib.request.urlopen,
    ):
        if not api_key.startswith(("lk_live_", "lk_test_")):
            raise ValueError("api_key must start with 'lk_live_' or 'lk_test_'")
        if region not in REGION_HOSTS:
            raise ValueError(f"unknown region {region!r}; choose one of {', '.join(REGION_HOSTS)}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.api_key = api_key
        self.base_url = REGION_HOSTS[region]
        self.timeout = timeout
        self.max_retries = max_retries
        self._sleep = sleep
        self._open = opener

    def _build(self, method: str, path: str, body: dict | None) -> urllib.request.Request:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """Send one request, retrying 429 and 5xx answers up to `max_retries` times."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._open(self._build(method, path, body), timeout=self.timeout) as resp:
                    payload = resp.read()
                    return json.loads(payload) if payload else {}
            except urllib.error.HTTPError as err:
                if err.code in RETRY_STATUSES and attempt <= self.max_retries:
                    self._sleep(backoff_delay(attempt, retry_after=err.headers.get("Retry-After")))
                    continue
                raise LumenError(f"{method} {path} failed with HTTP {err.code}", err.code, _error_code(err)) from err
            except urllib.error.URLError as err:
                if attempt <= self.max_retries:
                    self._sleep(backoff_delay(attempt))
                    continue
                raise LumenError(f"{method} {path} failed: {err.reason}") from err


def _error_code(err: urllib.error.HTTPError) -> str | None:
    """The `error.code` field of a JSON error body, e.g. 'rate_limited' or 'key_revoked'."""
    try:
        return json.loads(err.read() or b"{}").get("error", {}).get("code")
    except (ValueError, AttributeError):
        return None
