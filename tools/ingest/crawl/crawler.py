"""A polite website crawler on httpx: robots.txt, sitemaps, scope, de-duplication, retries, re-crawls.

- robots.txt is honoured for our User-Agent (`urllib.robotparser`), its
  `Crawl-delay` too; the request rate never exceeds `rate` per second.
- The start URL is a page or a `sitemap.xml` (sitemap indexes followed, bounded);
  robots.txt `Sitemap:` lines are read as well. Links are followed breadth-first.
- Scope: same scheme and host, and the start URL's folder (`same_domain`: the whole host).
- De-duplication: fragments and tracking parameters (`utm_*`, `gclid`,
  `fbclid`, ...) dropped, query sorted, default ports removed; a page's
  `<link rel="canonical">` names it.
- Retries: 429 and 5xx and transport errors, with `Retry-After` honoured and
  bounded attempts; non-HTML responses are counted and skipped.
- Re-crawls are incremental: a page whose sitemap `<lastmod>` is not newer than
  the one recorded at its last fetch is reused without a request; other pages'
  ETag / Last-Modified are sent back (a 304 reuses the stored copy), and the
  page's content hash decides whether it changed. Requests run on `workers`
  threads, started no faster than the rate allows (`ragsieve.tools.ingest.crawl.fetcher`);
  with no `rate` given, a loopback site is not paced, any other site gets 2/s. Index pages named as such
  (`genindex`, `py-modindex`, `search`, `contents`: `web_text.is_toc_url`) wait until every other known
  page is fetched, so a page budget is spent on text first. Pages that are gone (404/410, or no longer reached) are not
  returned, so the index removes them. The state file is rewritten (atomically)
  after every page: a killed crawl resumes its frontier.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

import httpx

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.crawl.fetcher import Fetched, Fetcher, RateLimiter, is_loopback
from ragsieve.tools.ingest.crawl.frontier import Frontier
from ragsieve.tools.ingest.crawl.report import CrawledPage, CrawlReport
from ragsieve.tools.ingest.crawl.state import CrawlState
from ragsieve.tools.ingest.crawl.urls import canonical_url, normalise, page_links, sitemap_entries

USER_AGENT = "ragsieve-crawler/1.0 (+https://pypi.org/project/ragsieve/)"
MAX_SITEMAPS = 20
DEFAULT_RATE = 2.0  # requests per second on a site that is not on loopback, when no rate is given


class Crawler:
    def __init__(
        self,
        start: str,
        *,
        state_dir: Path,
        max_pages: int = 200,
        rate: float | None = None,
        same_domain: bool = False,
        scope_prefix: str | None = None,
        timeout_s: float = 15.0,
        max_attempts: int = 3,
        max_page_bytes: int = 5_000_000,
        user_agent: str = USER_AGENT,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[int, int, str], None] | None = None,
        page_deadline_s: float = 60.0,
        workers: int = 4,
    ) -> None:
        if not start.startswith(("http://", "https://")):
            raise UsageError(f"a crawl starts at an http:// or https:// URL, got {start!r}")
        if (
            max_pages < 1
            or (rate is not None and rate <= 0)
            or max_attempts < 1
            or page_deadline_s <= 0
            or not 1 <= workers <= 32
        ):
            raise UsageError(
                "max_pages >= 1, rate > 0, max_attempts >= 1, page_deadline_s > 0 and 1 <= workers <= 32 are required"
            )
        if rate is None:
            rate = float("inf") if is_loopback(start) else DEFAULT_RATE
        self.start = normalise(start)
        parts = urlsplit(self.start)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        folder = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
        # scope: the start URL's folder; `same_domain` widens it to the whole host (never another host)
        self.scope = scope_prefix if scope_prefix is not None else (self.origin + "/" if same_domain else self.origin + folder)
        self.same_domain = same_domain
        self.max_pages, self.delay, self.max_attempts = max_pages, 1.0 / rate, max_attempts
        self.max_page_bytes, self.user_agent = max_page_bytes, user_agent
        self.page_deadline_s, self.workers = page_deadline_s, workers
        self.client = client or httpx.Client(
            timeout=timeout_s,
            follow_redirects=False,
            headers={"User-Agent": user_agent},
            trust_env=False,
            limits=httpx.Limits(max_connections=workers),
        )
        self.sleep, self.progress = sleep, progress
        self.state_dir = Path(state_dir)
        self._state = CrawlState(self.state_dir)
        self.state_path = self._state.path
        self.lastmod: dict[str, str] = {}  # url -> the sitemap's <lastmod>
        self._limiter = RateLimiter(self.delay, self.sleep)  # one limiter: robots.txt and sitemaps count too
        self._fetcher = self._make_fetcher(None)

    def _make_fetcher(self, robots: RobotFileParser | None) -> Fetcher:
        allowed = (lambda url: robots.can_fetch(self.user_agent, url)) if robots is not None else (lambda url: True)
        self._limiter.delay = self.delay
        return Fetcher(
            self.client,
            self._limiter,
            max_attempts=self.max_attempts,
            max_page_bytes=self.max_page_bytes,
            page_deadline_s=self.page_deadline_s,
            sleep=self.sleep,
            allowed=allowed,
        )

    # ------------------------------------------------------------------ public
    def run(self) -> CrawlReport:
        started = time.monotonic()
        state = self._state.load()
        robots = self._robots()
        self.delay = max(self.delay, float(robots.crawl_delay(self.user_agent) or 0))
        self._fetcher = self._make_fetcher(robots)
        resumed = state.get("frontier") and state.get("start") == self.start
        frontier = Frontier(state["frontier"] if resumed else self._seeds(robots))
        if resumed:
            self.lastmod = state.get("lastmod", {})
        seen = set(state["seen"]) if resumed else set(frontier.urls())
        done: dict[str, dict] = state.get("done", {}) if resumed else {}
        report = CrawlReport()
        pages_meta = state.get("pages", {})
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            while frontier and len(done) < self.max_pages:
                batch: list[str] = []
                while frontier and len(batch) < min(self.workers, self.max_pages - len(done)):
                    url = frontier.popleft()
                    if url in done or url in batch:
                        continue
                    if not robots.can_fetch(self.user_agent, url):
                        report.skipped.append((url, "disallowed by robots.txt"))
                        continue
                    batch.append(url)
                previous = [self._previous(pages_meta, url) for url in batch]
                outcomes = list(pool.map(lambda job: self._visit(job[0], job[1], report), zip(batch, previous)))
                for url, outcome in zip(batch, outcomes):
                    self._record(url, outcome, done, seen, frontier)
                    if self.progress:
                        self.progress(len(done), len(done) + len(frontier), url)
                self._state.save(
                    {
                        "start": self.start,
                        "frontier": frontier.urls(),
                        "seen": sorted(seen),
                        "done": done,
                        "pages": pages_meta,
                        "lastmod": self.lastmod,
                    }
                )
        for url, meta in done.items():
            if meta.get("gone") or meta.get("alias_of"):
                continue
            html = self._state.cached(meta["content_hash"])
            if html is not None:
                report.pages.append(CrawledPage(url, html, meta["content_hash"], meta.get("changed", True)))
        new_meta = {
            u: {k: m[k] for k in ("etag", "last_modified", "content_hash", "alias_of", "lastmod") if k in m}
            for u, m in done.items()
            if not m.get("gone")
        }
        self._state.save({"start": self.start, "frontier": [], "seen": [], "done": {}, "pages": new_meta})
        report.seconds = time.monotonic() - started
        return report

    # ----------------------------------------------------------------- helpers
    _counter_lock = threading.Lock()

    def _count(self, report: CrawlReport, name: str) -> None:
        with self._counter_lock:  # _visit runs on worker threads
            setattr(report, name, getattr(report, name) + 1)

    @staticmethod
    def _previous(pages_meta: dict, url: str) -> dict | None:
        previous = pages_meta.get(url)
        if previous and previous.get("alias_of"):  # redirected last time: validators of the target
            previous = pages_meta.get(previous["alias_of"])
        return previous

    def _record(self, url: str, outcome: dict | None, done: dict, seen: set, frontier: Frontier) -> None:
        final = outcome.pop("final", url) if outcome else url
        if final != url:  # redirected: the page is known by where it landed
            done[url] = {"alias_of": final}
            seen.add(final)
            if final in done:
                return
        done[final] = outcome or {"gone": True}
        if outcome:
            for link in outcome.pop("links", []):
                if link not in seen and self._in_scope(link):
                    seen.add(link)
                    frontier.append(link)

    def _in_scope(self, url: str) -> bool:
        return url.startswith(self.scope)

    def _seeds(self, robots: RobotFileParser) -> list[str]:
        if self.start.endswith(".xml"):
            return self._sitemap_urls([self.start])
        seeds = [self.start]
        for sitemap in robots.site_maps() or []:
            seeds += self._sitemap_urls([normalise(sitemap)])
        return list(dict.fromkeys(seeds))  # de-duplicated in linear time (a sitemap may list 100,000 URLs)

    def _sitemap_urls(self, sitemaps: list[str]) -> list[str]:
        urls: dict[str, None] = {}  # ordered set: `in` is O(1), so a 100,000-URL sitemap is linear
        queue, read, queued = deque(sitemaps), 0, set(sitemaps)
        while queue and read < MAX_SITEMAPS:
            response = self._get(queue.popleft(), {})
            read += 1
            if response is None or response.status_code != 200:
                continue
            for loc, lastmod in sitemap_entries(response.text):
                loc = normalise(loc)
                if loc.endswith(".xml"):
                    if loc not in queued:
                        queued.add(loc)
                        queue.append(loc)
                elif self._in_scope(loc) and loc not in urls:
                    urls[loc] = None
                    if lastmod:
                        self.lastmod[loc] = lastmod
        return list(urls)

    def _robots(self) -> RobotFileParser:
        parser = RobotFileParser()
        response = self._get(self.origin + "/robots.txt", {})
        if response is not None and response.status_code == 200:
            parser.parse(response.text.splitlines())
        elif response is not None and response.status_code in (401, 403):
            parser.parse(["User-agent: *", "Disallow: /"])  # everything refused
        else:
            parser.parse([])  # no rules: everything allowed
        return parser

    def _visit(self, url: str, previous: dict | None, report: CrawlReport) -> dict | None:
        lastmod = self.lastmod.get(url)
        if previous and lastmod and previous.get("lastmod") == lastmod and not previous.get("alias_of"):
            html = self._state.cached(previous["content_hash"])
            if html is not None:  # the sitemap says unchanged since the last fetch: no request
                self._count(report, "reused_by_lastmod")
                return {**previous, "changed": False, "links": page_links(url, html), "final": url}
        headers = {}
        if previous and previous.get("etag"):
            headers["If-None-Match"] = previous["etag"]
        if previous and previous.get("last_modified"):
            headers["If-Modified-Since"] = previous["last_modified"]
        response = self._get(url, headers)
        if response is None:
            report.skipped.append((url, "unreachable after retries"))
            return None
        if response.refused:
            report.skipped.append((url, response.refused))
            return None
        if response.status_code == 304 and previous and (html := self._state.cached(previous["content_hash"])) is not None:
            self._count(report, "not_modified")
            final = normalise(str(response.url))
            return {
                **previous,
                "changed": False,
                "links": page_links(final, html),
                "final": final,
                **({"lastmod": lastmod} if lastmod else {}),
            }
        if response.status_code in (404, 410):
            report.skipped.append((url, f"HTTP {response.status_code} (gone: removed from the index)"))
            return None
        if response.status_code != 200:
            report.skipped.append((url, f"HTTP {response.status_code}"))
            return None
        final = normalise(str(response.url))
        if final != url and not self._in_scope(final):
            report.skipped.append((url, f"redirected out of scope to {final}"))
            return None
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind not in ("text/html", "application/xhtml+xml"):
            report.skipped.append((url, f"not HTML ({kind or 'no content type'})"))
            return None
        self._count(report, "fetched")
        html = response.text
        canonical = canonical_url(url, html)
        if canonical and canonical != url and self._in_scope(canonical):
            if canonical != final:
                return {"alias_of": canonical, "links": [canonical]}
        digest = hashlib.sha256(html.encode("utf-8", "surrogatepass")).hexdigest()
        self._state.store(digest, html)
        meta = {
            "content_hash": digest,
            "changed": not previous or previous.get("content_hash") != digest,
            "etag": response.headers.get("etag"),
            "last_modified": response.headers.get("last-modified"),
            "lastmod": lastmod,
        }
        return {k: v for k, v in meta.items() if v is not None} | {"links": page_links(final, html), "final": final}

    def _get(self, url: str, headers: dict) -> Fetched | None:
        return self._fetcher.get(url, headers)
