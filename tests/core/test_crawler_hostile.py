"""The crawler against hostile or slow sites (issue 22's re-run, items 6-8) and a fast incremental re-crawl, on
real servers bound to 127.0.0.1 that stop by themselves: a 100,000-URL sitemap, a page trickling 1 byte per
second, a redirect to another host, sitemap `lastmod` honoured, concurrent unpaced requests on loopback."""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ragsieve.tools.ingest.crawl.crawler import Crawler

PAGE = "<html><head><title>{0}</title></head><body><main><h1 id='top'>{0}</h1><p>{1}</p></main></body></html>"


@contextlib.contextmanager
def site(routes: dict, lifetime_s: float = 60.0):
    """A loopback server: `routes[path]` is (status, headers, body) or a callable(handler) writing the reply.
    Records every path requested; shuts down on exit or after `lifetime_s`."""
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requested.append(self.path)
            route = routes.get(self.path.split("?")[0])
            if callable(route):
                return route(self)
            status, headers, body = route if route else (404, {}, b"not found")
            self.send_response(status)
            for k, v in {"Content-Type": "text/html", **headers}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    timer = threading.Timer(lifetime_s, server.shutdown)
    timer.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested, routes
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()


def html(title: str, text: str = "", links=()) -> bytes:
    body = text + "".join(f' <a href="{h}">{h}</a>' for h in links)
    return PAGE.format(title, body).encode()


def test_a_100000_url_sitemap_does_not_stall_the_crawl(tmp_path):
    with site({}) as (origin, requested, routes):
        for part in (1, 2):
            locs = "".join(f"<url><loc>{origin}/docs/p{part}-{i}.html</loc></url>" for i in range(50_000))
            routes[f"/docs/sitemap-{part}.xml"] = (200, {"Content-Type": "application/xml"}, f"<urlset>{locs}</urlset>".encode())
        routes["/docs/sitemap.xml"] = (
            200,
            {"Content-Type": "application/xml"},
            (
                f"<sitemapindex><sitemap><loc>{origin}/docs/sitemap-1.xml</loc></sitemap>"
                f"<sitemap><loc>{origin}/docs/sitemap-2.xml</loc></sitemap></sitemapindex>"
            ).encode(),
        )
        for i in range(20):
            routes[f"/docs/p1-{i}.html"] = (200, {}, html(f"Page {i}", "text"))
        started = time.process_time()
        report = Crawler(origin + "/docs/sitemap.xml", state_dir=tmp_path / "s", max_pages=20).run()
        cpu = time.process_time() - started
    assert len(report.pages) == 20
    assert cpu < 60  # was 480 s (quadratic de-duplication) before the first page


def test_one_slow_page_does_not_hold_the_crawl(tmp_path):
    def trickle(handler):  # 1 byte per second, for up to 60 s
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.end_headers()
        for _ in range(60):
            try:
                handler.wfile.write(b"x")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(1)

    routes = {
        "/docs/index.html": (200, {}, html("Home", "hello", ["slow.html", "fast.html"])),
        "/docs/slow.html": trickle,
        "/docs/fast.html": (200, {}, html("Fast", "quick")),
    }
    with site(routes) as (origin, _, _):
        started = time.monotonic()
        report = Crawler(origin + "/docs/index.html", state_dir=tmp_path / "s", page_deadline_s=2).run()
        elapsed = time.monotonic() - started
    assert sorted(p.url.rsplit("/", 1)[1] for p in report.pages) == ["fast.html", "index.html"]
    why = dict(report.skipped)[origin + "/docs/slow.html"]
    assert "page deadline" in why
    assert elapsed < 15  # was 90 s for one page at 1 byte/s


def test_redirects_to_another_host_are_not_followed(tmp_path):
    with site({"/x.html": (200, {}, html("Elsewhere", "other host"))}) as (other, other_requests, _):
        routes = {
            "/docs/index.html": (200, {}, html("Home", "hi", ["away.html", "moved.html"])),
            "/docs/away.html": (302, {"Location": other + "/x.html"}, b""),
            "/docs/moved.html": (301, {"Location": "/docs/here.html"}, b""),
            "/docs/here.html": (200, {}, html("Here", "same host")),
        }
        with site(routes) as (origin, _, _):
            report = Crawler(origin + "/docs/index.html", state_dir=tmp_path / "s").run()
    assert other_requests == []  # the request to the other host was never sent
    assert "another host" in dict(report.skipped)[origin + "/docs/away.html"]
    assert sorted(p.url.rsplit("/", 1)[1] for p in report.pages) == ["here.html", "index.html"]  # same host: followed


def test_incremental_recrawl_honours_sitemap_lastmod_and_is_not_paced_on_loopback(tmp_path):
    n = 30
    routes = {f"/docs/p{i}.html": (200, {}, html(f"Page {i}", f"text {i}")) for i in range(n)}

    def sitemap(changed: int | None = None) -> bytes:
        return (
            "<urlset>"
            + "".join(
                f"<url><loc>{{origin}}/docs/p{i}.html</loc><lastmod>2026-11-{'24' if i == changed else '01'}</lastmod></url>"
                for i in range(n)
            )
            + "</urlset>"
        ).encode()

    with site(routes) as (origin, requested, routes):
        routes["/docs/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, sitemap().replace(b"{origin}", origin.encode()))
        sleeps: list[float] = []
        first = Crawler(origin + "/docs/sitemap.xml", state_dir=tmp_path / "s", sleep=sleeps.append).run()
        assert len(first.pages) == n and first.fetched == n
        assert sleeps == []  # loopback and no --rate: no artificial pacing
        requested.clear()
        routes["/docs/sitemap.xml"] = (
            200,
            {"Content-Type": "application/xml"},
            sitemap(changed=7).replace(b"{origin}", origin.encode()),
        )
        again = Crawler(origin + "/docs/sitemap.xml", state_dir=tmp_path / "s").run()
    pages = [p for p in requested if p.endswith(".html")]
    assert pages == ["/docs/p7.html"]  # only the page whose lastmod moved was requested
    assert again.reused_by_lastmod == n - 1 and len(again.pages) == n
    assert "30 pages" in again.summary() and "29 unchanged by sitemap lastmod" in again.summary()


def test_a_raised_rate_still_spaces_request_starts(tmp_path):
    routes = {f"/docs/p{i}.html": (200, {}, html(f"P{i}", "t", [f"p{i + 1}.html"])) for i in range(6)}
    starts: list[float] = []
    with site(routes) as (origin, requested, _):
        import httpx

        client = httpx.Client(trust_env=False, event_hooks={"request": [lambda r: starts.append(time.monotonic())]})
        Crawler(origin + "/docs/p0.html", state_dir=tmp_path / "s", rate=20, client=client).run()
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(starts) >= 7 and min(gaps) >= 1 / 20 - 0.01  # robots.txt + 6 pages, never faster than 20/s
