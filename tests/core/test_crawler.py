"""The crawler against a real site on loopback (`python -m http.server` over a fixture site): robots.txt,
sitemap, scope, redirect, 404, a non-HTML asset, de-duplication, and an incremental re-crawl."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ragsieve.tools.ingest.crawl.crawler import Crawler
from ragsieve.tools.ingest.crawl.urls import normalise


def page(title: str, body: str, links: list[str] = ()) -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<html><head><title>{title}</title></head><body><div role='navigation'><ul>{anchors}</ul></div>"
        f"<div class='body' role='main'><h1 id='top'>{title}</h1><section id='details'><h2>Details</h2>"
        f"<p>{body}</p></section></div><div class='footer'>Copyright. Show Source</div></body></html>"
    )


def make_site(root: Path) -> Path:
    docs = root / "docs"
    (docs / "private").mkdir(parents=True)
    (docs / "guide").mkdir()
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /docs/private/\n", encoding="utf-8")
    (docs / "index.html").write_text(
        page(
            "Home",
            "Welcome to the frobnicator docs.",
            [
                "guide",
                "keys.html?utm_source=x#top",
                "private/secret.html",
                "missing.html",
                "logo.png",
                "https://example.org/out.html",
                "/outside.html",
            ],
        ),
        encoding="utf-8",
    )
    (docs / "guide" / "index.html").write_text(page("Guide", "The guide explains frobnication."), encoding="utf-8")
    (docs / "keys.html").write_text(page("Keys", "Rotate keys every ninety days.", ["index.html"]), encoding="utf-8")
    (docs / "private" / "secret.html").write_text(page("Secret", "never crawled"), encoding="utf-8")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (docs / "orphan.html").write_text(page("Orphan", "Only the sitemap links here."), encoding="utf-8")
    (root / "outside.html").write_text(page("Outside", "out of scope"), encoding="utf-8")
    (docs / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>http://HOST/docs/index.html</loc></url><url><loc>http://HOST/docs/orphan.html</loc></url>"
        "</urlset>",
        encoding="utf-8",
    )
    return root


@contextlib.contextmanager
def serve(root: Path, lifetime_s: float = 120.0):
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"port (\d+)", line).group(1))
        host = f"127.0.0.1:{port}"
        sitemap = root / "docs" / "sitemap.xml"
        sitemap.write_text(sitemap.read_text().replace("HOST", host), encoding="utf-8")
        deadline = time.monotonic() + lifetime_s
        yield f"http://{host}", deadline
    finally:
        proc.terminate()
        proc.wait(10)


def test_normalise_drops_fragments_tracking_and_default_ports():
    assert normalise("HTTP://Docs.Example:80/a?utm_source=x&b=2&a=1#frag") == "http://docs.example/a?a=1&b=2"
    assert normalise("https://x.org:443") == "https://x.org/"


def test_crawl_scope_robots_redirect_404_assets_and_recrawl(tmp_path):
    site = make_site(tmp_path / "site")
    with serve(site) as (origin, _):
        state = tmp_path / "state"
        waits: list[float] = []

        def pause(seconds: float) -> None:
            waits.append(seconds)
            time.sleep(seconds)

        crawler = Crawler(origin + "/docs/index.html", state_dir=state, rate=50, sleep=pause)
        report = crawler.run()
        got = sorted(p.url.replace(origin, "") for p in report.pages)
        assert got == ["/docs/guide/", "/docs/index.html", "/docs/keys.html"]
        skipped = dict((u.replace(origin, ""), why) for u, why in report.skipped)
        assert skipped["/docs/private/secret.html"] == "disallowed by robots.txt"
        assert "HTTP 404" in skipped["/docs/missing.html"]
        assert "not HTML" in skipped["/docs/logo.png"]
        assert "/outside.html" not in got and all("example.org" not in u for u in got)  # out of scope
        assert report.fetched == 3 and all(p.changed for p in report.pages)
        # the redirect /docs/guide -> /docs/guide/ (http.server's folder redirect) was followed, once
        # re-crawl: unchanged pages come back as 304 (Last-Modified), a changed page is new
        time.sleep(1.1)
        (site / "docs" / "keys.html").write_text(page("Keys", "Rotate keys every thirty days.", ["index.html"]), encoding="utf-8")
        again = Crawler(origin + "/docs/index.html", state_dir=state, rate=50, sleep=pause).run()
        changed = {p.url.replace(origin, ""): p.changed for p in again.pages}
        assert changed == {"/docs/guide/": False, "/docs/index.html": False, "/docs/keys.html": True}
        assert again.not_modified == 2
        # the crawler is polite: request starts are spaced at the configured rate, shared by its 4 workers
        # (a worker waits at most for the slots the others reserved before it)
        assert waits and max(waits) <= 4 / 50 + 0.01


def test_sitemap_start_and_user_agent(tmp_path):
    site = make_site(tmp_path / "site")
    with serve(site) as (origin, _):
        seen_agents = []

        def hook(request):
            seen_agents.append(request.headers["user-agent"])

        client = httpx.Client(
            follow_redirects=True,
            event_hooks={"request": [hook]},
            trust_env=False,
            headers={"User-Agent": "ragsieve-crawler/1.0 (+https://pypi.org/project/ragsieve/)"},
        )
        report = Crawler(
            origin + "/docs/sitemap.xml", state_dir=tmp_path / "s", rate=50, client=client, sleep=lambda s: None
        ).run()
        urls = {p.url.replace(origin, "") for p in report.pages}
        assert "/docs/orphan.html" in urls  # reached only through the sitemap
        assert set(seen_agents) == {"ragsieve-crawler/1.0 (+https://pypi.org/project/ragsieve/)"}


def test_index_a_website_and_remove_pages_that_disappeared(tmp_path, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    site = make_site(tmp_path / "site")
    with serve(site) as (origin, _):
        builder = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False)
        crawl = {"rate": 50, "sleep": lambda s: None}
        report = builder.build([origin + "/docs/index.html"], crawl=crawl)
        assert report.docs_added == 3
        with HybridIndex.open(tmp_path / "idx") as index:
            chunks = index.store.get_many(range(len(index)))
            keys = [c for c in chunks if "ninety days" in c.text]
            assert keys and keys[0].source == origin + "/docs/keys.html"
            assert all("Show Source" not in c.text for c in chunks)  # the footer is gone
            assert keys[0].symbol in ("#top", "#details")
        (site / "docs" / "keys.html").unlink()
        report = builder.build([origin + "/docs/index.html"], crawl=crawl)
        assert (report.docs_removed, report.docs_unchanged, report.chunks_embedded) == (1, 2, 0)


def test_crawler_refuses_bad_start():
    with pytest.raises(Exception, match="http"):
        Crawler("ftp://x", state_dir=Path("/tmp/none"))
