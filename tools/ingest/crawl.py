"""A polite website crawler on httpx: robots.txt, sitemaps, scope, de-duplication, rate, incremental, resumable.

Politeness: a clear User-Agent; robots.txt (allow/disallow and Crawl-delay)
honoured for every URL; at most `rate` requests per second (slower when
robots asks); 429/5xx/timeouts retried at most `retries` times honouring
Retry-After (capped); redirects followed (at most 5) and the final URL must
stay in scope; bodies over `max_bytes` and non-HTML answers are skipped,
named. Every loop is bounded: `max_pages` pages fetched, sitemaps nested at
most 3 deep.

Incremental: `known` (url -> {etag, last_modified, hash} of the last crawl)
makes each known page a conditional GET; 304 or an unchanged body hash means
unchanged, 404/410 means gone. Resumable: with `pending_dir`, every fetched
page and the frontier are saved as the crawl goes (atomically), and a crawl
of the same start URL that finds them continues where it stopped.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.robotparser import RobotFileParser

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.urls import canonical_url, in_scope, is_url, page_links, scope_of, sitemap_urls

log = logging.getLogger(__name__)
USER_AGENT = "ragsieve-crawler/0.1 (+https://pypi.org/project/ragsieve/; respects robots.txt)"
MAX_RETRY_WAIT_S = 30.0


@dataclass
class Page:
    url: str  # canonical URL: the document id
    fetched_url: str  # where the body came from (after redirects)
    html: str
    etag: str | None = None
    last_modified: str | None = None
    hash: str = ""


@dataclass
class CrawlResult:
    pages: list[Page] = field(default_factory=list)  # new or changed
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # known pages that answered 404/410 or left the scope
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (url, reason)
    requests: int = 0
    seconds: float = 0.0
    resumed: int = 0

    def summary(self) -> str:
        return (f"crawled {self.requests} requests in {self.seconds:.1f}s: {len(self.pages)} new or changed pages, "
                f"{len(self.unchanged)} unchanged, {len(self.gone)} gone, {len(self.skipped)} skipped"
                + (f" ({self.resumed} resumed from an interrupted crawl)" if self.resumed else ""))

    def state(self, known: dict[str, dict]) -> dict[str, dict]:
        """The `known` map for the next crawl: previous entries updated, gone pages dropped."""
        out = {u: v for u, v in known.items() if u not in self.gone}
        for p in self.pages:
            out[p.url] = {"etag": p.etag, "last_modified": p.last_modified, "hash": p.hash}
        return out


class Crawler:
    """Crawl one site from a start page or sitemap; one public method, `run(known)`."""

    def __init__(self, start_url: str, *, max_pages: int = 200, same_domain: bool = False, rate: float = 2.0,
                 retries: int = 2, timeout_s: float = 15.0, max_bytes: int = 5_000_000,
                 user_agent: str = USER_AGENT, pending_dir: str | Path | None = None,
                 progress: Callable[[str, int, int], None] | None = None, client=None) -> None:
        if not is_url(start_url):
            raise UsageError(f"not an http(s) URL: {start_url!r}")
        for name, value, low in (("max_pages", max_pages, 1), ("retries", retries, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"{name} must be an integer >= {low}, got {value!r}")
        if not rate > 0:
            raise UsageError(f"rate must be > 0 requests per second, got {rate!r}")
        self.start_url, self.max_pages, self.rate, self.retries = start_url, max_pages, float(rate), retries
        self.scope = scope_of(start_url, same_domain)
        self.timeout_s, self.max_bytes, self.user_agent = timeout_s, max_bytes, user_agent
        self.pending = Path(pending_dir) if pending_dir else None
        self.progress = progress or (lambda stage, done, total: None)
        self._client = client
        self._last_request = 0.0
        self._interval = 1.0 / self.rate

    # -- HTTP ------------------------------------------------------------------
    def _get(self, client, url: str, headers: dict | None = None):
        """GET with the rate limit and polite retries; the response, or None after a transport failure."""
        for attempt in range(self.retries + 1):
            wait = self._last_request + self._interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last_request = time.monotonic()
            self.result.requests += 1
            try:
                with client.stream("GET", url, headers=headers or {}) as resp:
                    body = b""
                    for part in resp.iter_bytes():
                        body += part
                        if len(body) > self.max_bytes:
                            return resp, None
            except Exception as exc:  # noqa: BLE001 - httpx transport errors of every kind: retried, then named
                if attempt == self.retries:
                    self.result.skipped.append((url, f"unreachable: {type(exc).__name__}: {exc}"))
                    return None, None
                time.sleep(min(MAX_RETRY_WAIT_S, 0.5 * 2 ** attempt))
                continue
            if resp.status_code in (429, 500, 502, 503, 504) and attempt < self.retries:
                retry_after = resp.headers.get("retry-after", "")
                delay = float(retry_after) if retry_after.replace(".", "", 1).isdigit() else 0.5 * 2 ** attempt
                time.sleep(min(MAX_RETRY_WAIT_S, delay))
                continue
            return resp, body
        return None, None

    def _robots(self, client) -> RobotFileParser:
        robots = RobotFileParser()
        origin = scope_of(self.start_url, True)
        resp, body = self._get(client, origin + "robots.txt")
        if resp is not None and resp.status_code == 200 and body is not None:
            robots.parse(body.decode("utf-8", "replace").splitlines())
        else:
            robots.parse([])  # no robots.txt: everything allowed
        delay = robots.crawl_delay(self.user_agent)
        if delay:
            self._interval = max(self._interval, float(delay))
        return robots

    # -- the crawl ---------------------------------------------------------------
    def run(self, known: dict[str, dict] | None = None) -> CrawlResult:
        import httpx

        known = dict(known or {})
        self.result = CrawlResult()
        start = time.perf_counter()
        client = self._client or httpx.Client(follow_redirects=True, max_redirects=5, timeout=self.timeout_s,
                                              headers={"User-Agent": self.user_agent})
        try:
            self._crawl(client, known)
        finally:
            if self._client is None:
                client.close()
        self.result.seconds = time.perf_counter() - start
        return self.result

    def _crawl(self, client, known: dict[str, dict]) -> None:
        robots = self._robots(client)
        frontier, seen = self._resume() or ([], set())
        if not frontier and not self.result.pages:
            seeds = [self.start_url] if not self.start_url.lower().endswith(".xml") else []
            sitemaps = [self.start_url] if self.start_url.lower().endswith(".xml") else []
            sitemaps += [u for u in (robots.site_maps() or []) if in_scope(u, scope_of(self.start_url, True))]
            seeds += self._from_sitemaps(client, sitemaps)
            seeds += sorted(known)  # every known page is checked again: changed, unchanged or gone
            frontier = [u for u in dict.fromkeys(canonical_url(s) for s in seeds)]
        fetched = len(self.result.pages)
        while frontier and fetched < self.max_pages:
            url = frontier.pop(0)
            if url in seen:
                continue
            seen.add(url)
            if not in_scope(url, self.scope):
                self._drop(url, known, "out of scope")
                continue
            if not robots.can_fetch(self.user_agent, url):
                self._drop(url, known, "disallowed by robots.txt")
                continue
            previous = known.get(url, {})
            headers = {k: v for k, v in (("If-None-Match", previous.get("etag")),
                                         ("If-Modified-Since", previous.get("last_modified"))) if v}
            resp, body = self._get(client, url, headers)
            fetched += 1
            self.progress("crawling", fetched, self.max_pages)
            if resp is None:
                continue
            final = canonical_url(str(resp.url))
            if resp.status_code == 304:
                self.result.unchanged.append(url)
            elif resp.status_code in (404, 410):
                self._drop(url, known, f"HTTP {resp.status_code}")
            elif resp.status_code != 200 or body is None:
                reason = f"HTTP {resp.status_code}" if body is not None else f"larger than {self.max_bytes} bytes"
                self.result.skipped.append((url, reason))
            elif final != url and not in_scope(final, self.scope):
                self._drop(url, known, f"redirects out of scope to {final}")
            elif "html" not in resp.headers.get("content-type", "text/html").lower():
                self.result.skipped.append((url, f"not HTML: {resp.headers.get('content-type')}"))
            else:
                self._page(url, final, resp, body, known, seen, frontier)
            self._save_pending(frontier, seen)
        self.result.skipped.extend((u, f"not fetched: max_pages {self.max_pages} reached") for u in frontier
                                   if u not in seen)

    def _page(self, url, final, resp, body, known, seen, frontier) -> None:
        html = body.decode(resp.encoding or "utf-8", "replace")
        links, canonical = page_links(html, str(resp.url))
        key = final
        if canonical and in_scope(canonical, self.scope):
            key = canonical_url(canonical)
        if key != url and (key in seen and key != final or any(p.url == key for p in self.result.pages)):
            self.result.skipped.append((url, f"duplicate of {key}"))
            return
        seen.update({key, final})
        digest = hashlib.sha256(body).hexdigest()
        if known.get(key, {}).get("hash") == digest:
            self.result.unchanged.append(key)
        else:
            self.result.pages.append(Page(key, str(resp.url), html, resp.headers.get("etag"),
                                          resp.headers.get("last-modified"), digest))
            self._save_page(self.result.pages[-1])
        frontier.extend(u for u in dict.fromkeys(canonical_url(x) for x in links) if u not in seen)

    def _drop(self, url: str, known: dict, reason: str) -> None:
        """A URL not to index: gone from the index when it was known, else skipped with its reason."""
        if url in known:
            self.result.gone.append(url)
        else:
            self.result.skipped.append((url, reason))

    def _from_sitemaps(self, client, sitemaps: list[str]) -> list[str]:
        pages: list[str] = []
        todo, depth = list(sitemaps), 0
        while todo and depth < 3:
            nested: list[str] = []
            for sm in todo:
                resp, body = self._get(client, sm)
                if resp is None or resp.status_code != 200 or body is None:
                    self.result.skipped.append((sm, "sitemap unavailable"))
                    continue
                found, more = sitemap_urls(body.decode("utf-8", "replace"), str(resp.url))
                pages += found
                nested += more
            todo, depth = nested, depth + 1
        return pages

    # -- resume ----------------------------------------------------------------------
    def _save_page(self, page: Page) -> None:
        if self.pending is None:
            return
        self.pending.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(page.url.encode()).hexdigest() + ".json"
        _atomic_write(self.pending / name, json.dumps(asdict(page)))

    def _save_pending(self, frontier: list[str], seen: set[str]) -> None:
        if self.pending is None or not self.pending.is_dir():
            return
        _atomic_write(self.pending / "state.json", json.dumps(
            {"start_url": self.start_url, "frontier": frontier, "seen": sorted(seen)}))

    def _resume(self) -> tuple[list[str], set[str]] | None:
        if self.pending is None or not (self.pending / "state.json").is_file():
            return None
        try:
            state = json.loads((self.pending / "state.json").read_text(encoding="utf-8"))
            if state.get("start_url") != self.start_url:
                return None
            pages = [Page(**json.loads(p.read_text(encoding="utf-8"))) for p in sorted(self.pending.glob("*.json"))
                     if p.name != "state.json"]
        except (OSError, ValueError, TypeError) as exc:
            log.warning("interrupted crawl state in %s unreadable, starting over: %s", self.pending, exc)
            return None
        self.result.pages.extend(pages)
        self.result.resumed = len(pages)
        return list(state["frontier"]), set(state["seen"])


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
