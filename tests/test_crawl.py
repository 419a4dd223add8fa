"""The crawler against a real `python -m http.server` on loopback over a fixture site."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from ragsieve.tools.index.builder import IndexBuilder
from ragsieve.tools.index.hybrid import HybridIndex
from ragsieve.tools.ingest.crawl import Crawler
from ragsieve.tools.ingest.urls import canonical_url, scope_of, sitemap_urls
from ragsieve.tools.ingest.web import crawl_and_index
from site_server import serve_folder

pytest.importorskip("httpx")
SITE = Path(__file__).parent / "fixtures" / "site"


@pytest.fixture()
def site(tmp_path):
    folder = tmp_path / "site"
    shutil.copytree(SITE, folder)
    with serve_folder(folder) as base:
        yield folder, base


def _paths(urls, base):
    return sorted(u.removeprefix(base.rstrip("/")) for u in urls)


def test_crawl_honours_robots_sitemap_scope_redirect_404_and_assets(site):
    folder, base = site
    result = Crawler(base + "index.html", rate=100, max_pages=50).run()
    assert _paths([p.url for p in result.pages], base) == ["/changelog.html", "/docs/", "/guide.html", "/index.html"]
    reasons = {u.removeprefix(base.rstrip("/")): r for u, r in result.skipped}
    assert reasons["/private/secret.html"] == "disallowed by robots.txt"
    assert reasons["/missing.html"] == "HTTP 404"
    assert reasons["/data.csv"].startswith("not HTML: text/csv")
    docs_page = next(p for p in result.pages if p.url.endswith("/docs/"))
    assert docs_page.fetched_url.endswith("/docs/")  # /docs answered 301 -> /docs/
    assert not result.gone and result.requests < 20
    guide = next(p for p in result.pages if p.url.endswith("/guide.html"))
    assert guide.last_modified and len(guide.hash) == 64


def test_crawl_index_search_recrawl_and_removal(site, tmp_path, embedder):
    folder, base = site
    index = tmp_path / "index"
    builder = IndexBuilder(index, embedder=embedder, progress=False, chunk_tokens=40)
    result, report = crawl_and_index(builder, base + "sitemap.xml", rate=100, max_pages=50)
    assert len(result.pages) == 4 and report.docs_added == 4
    with HybridIndex.open(index) as built:
        sources = {c.source for c in (built.store.get(r) for r in range(len(built)))}
        texts = " ".join(built.store.texts())
    assert base + "guide.html#retry-policy" in sources and base + "docs/#webhooks" in sources
    assert "Copyright" not in texts and "cookies" not in texts and "staging master key" not in texts
    state = json.loads(next((index / "crawl").glob("*.json")).read_text())
    assert set(state["pages"]) == {p.url for p in result.pages}
    # the changelog changes, the webhooks page disappears; nothing else is downloaded again
    changelog = folder / "changelog.html"
    changelog.write_text(changelog.read_text().replace("Version 2.0", "Version 3.0 adds key tags. Version 2.0"))
    later = time.time() + 5
    os.utime(changelog, (later, later))
    shutil.rmtree(folder / "docs")
    again, report2 = crawl_and_index(IndexBuilder(index, embedder=embedder, progress=False, chunk_tokens=40), base + "sitemap.xml",
                                     rate=100, max_pages=50)
    assert _paths([p.url for p in again.pages], base) == ["/changelog.html"]
    assert _paths(again.gone, base) == ["/docs/"]
    assert _paths(again.unchanged, base) == ["/guide.html", "/index.html"]
    assert (report2.docs_updated, report2.docs_removed, report2.docs_unchanged) == (1, 1, 2)
    with HybridIndex.open(index) as built:
        assert sorted(built.store.documents()) == sorted(base + p for p in ("changelog.html", "guide.html", "index.html"))
    third, report3 = crawl_and_index(IndexBuilder(index, embedder=embedder, progress=False, chunk_tokens=40), base + "sitemap.xml",
                                     rate=100, max_pages=50)
    assert report3 is None and not third.pages and len(third.unchanged) == 3


def test_interrupted_crawl_resumes(site, tmp_path):
    folder, base = site
    pending = tmp_path / "pending"
    calls = []

    def stop_after_two(stage, done, total):
        calls.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Crawler(base + "index.html", rate=100, pending_dir=pending, progress=stop_after_two).run()
    assert len(list(pending.glob("*.json"))) >= 2  # state.json and the first page
    resumed = Crawler(base + "index.html", rate=100, pending_dir=pending).run()
    assert resumed.resumed >= 1
    assert _paths([p.url for p in resumed.pages], base) == ["/changelog.html", "/docs/", "/guide.html", "/index.html"]


def test_url_rules_and_refusals():
    assert canonical_url("HTTP://Example.COM:80/a/b.html?utm_source=x&b=2&a=1#frag") == "http://example.com/a/b.html?a=1&b=2"
    assert scope_of("https://d.org/docs/lib/index.html", False) == "https://d.org/docs/lib/"
    assert scope_of("https://d.org/docs/lib/index.html", True) == "https://d.org/"
    pages, nested = sitemap_urls('<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                 '<sitemap><loc>/s1.xml</loc></sitemap></sitemapindex>', "https://d.org/sitemap.xml")
    assert (pages, nested) == ([], ["https://d.org/s1.xml"])
    assert sitemap_urls("not xml <", "https://d.org/") == ([], [])
    with pytest.raises(Exception, match="http"):
        Crawler("ftp://d.org/")
    with pytest.raises(Exception, match="rate"):
        Crawler("https://d.org/", rate=0)
