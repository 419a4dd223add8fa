"""The crawler's HTTP side: a shared rate limit, a deadline per page, and redirects kept on one host.

- Rate: requests start at least `delay` seconds apart across every worker thread (a slot is reserved
  under a lock, the wait happens outside it). A delay of 0 means no pacing at all.
- A page that trickles in (1 byte per second) is cut at `page_deadline_s` from its first byte request:
  httpx's timeout is per read, so without this one slow page held the crawl for as long as it liked.
- Redirects are followed here, hop by hop (at most `max_redirects`), never to another scheme or host:
  the request to another host is never sent (its robots.txt was never read), the page is reported as
  redirected off-site. `allowed(url)` (robots.txt) is asked for every hop on the host as well.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urljoin, urlsplit

import httpx

REDIRECTS = (301, 302, 303, 307, 308)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass
class Fetched:
    status_code: int
    headers: httpx.Headers
    url: str
    content: bytes
    encoding: str = "utf-8"
    refused: str = ""  # why no request was sent or the body was dropped (off-site redirect, deadline)

    @property
    def text(self) -> str:
        try:
            return self.content.decode(self.encoding, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")


class RateLimiter:
    """At most one request start per `delay` seconds, shared by threads."""

    def __init__(self, delay: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.delay, self.sleep = max(0.0, delay), sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if self.delay <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.delay
        if start > now:
            self.sleep(start - now)


class Fetcher:
    def __init__(
        self,
        client: httpx.Client,
        limiter: RateLimiter,
        *,
        max_attempts: int = 3,
        max_page_bytes: int = 5_000_000,
        page_deadline_s: float = 60.0,
        max_redirects: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        allowed: Callable[[str], bool] = lambda url: True,
    ) -> None:
        self.client, self.limiter, self.sleep, self.allowed = client, limiter, sleep, allowed
        self.max_attempts, self.max_page_bytes = max_attempts, max_page_bytes
        self.page_deadline_s, self.max_redirects = page_deadline_s, max_redirects

    def get(self, url: str, headers: dict) -> Fetched | None:
        """The response for `url` after same-host redirects; None when unreachable after the retries."""
        origin = _origin(url)
        for _ in range(self.max_redirects + 1):
            response = self._get_one(url, headers)
            if response is None or response.status_code not in REDIRECTS or "location" not in response.headers:
                return response
            target = urljoin(url, response.headers["location"])
            if _origin(target) != origin:
                return Fetched(
                    response.status_code,
                    response.headers,
                    target,
                    b"",
                    refused=f"redirected to another host ({_origin(target)}): not followed",
                )
            if not self.allowed(target):
                return Fetched(
                    response.status_code, response.headers, target, b"", refused="redirected to a page disallowed by robots.txt"
                )
            url = target
        return Fetched(310, httpx.Headers(), url, b"", refused=f"more than {self.max_redirects} redirects")

    def _get_one(self, url: str, headers: dict) -> Fetched | None:
        for attempt in range(1, self.max_attempts + 1):
            self.limiter.wait()
            try:
                response = self._stream(url, headers)
            except httpx.HTTPError:
                if attempt == self.max_attempts:
                    return None
                self.sleep(min(30.0, 2.0**attempt))
                continue
            if response.refused:
                return response
            if response.status_code == 429 or response.status_code >= 500:
                if attempt == self.max_attempts:
                    return response
                retry_after = response.headers.get("retry-after", "")
                self.sleep(min(60.0, float(retry_after)) if retry_after.isdigit() else min(30.0, 2.0**attempt))
                continue
            return response
        return None

    def _stream(self, url: str, headers: dict) -> Fetched:
        deadline = time.monotonic() + self.page_deadline_s
        with self.client.stream("GET", url, headers=headers, follow_redirects=False) as streamed:
            body, size, refused = [], 0, ""
            for chunk in streamed.iter_bytes():
                size += len(chunk)
                if size > self.max_page_bytes:  # a page over the bound is cut, not held whole
                    break
                body.append(chunk)
                if time.monotonic() > deadline:
                    refused = f"slower than the page deadline ({self.page_deadline_s:g}s): dropped"
                    break
            return Fetched(
                streamed.status_code, streamed.headers, str(streamed.url), b"".join(body), streamed.encoding or "utf-8", refused
            )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}"
