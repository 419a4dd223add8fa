"""An interrupted crawl resumes its frontier: pages already fetched are not fetched again (real http.server)."""

from __future__ import annotations

import httpx
import pytest

from ragsieve.tools.ingest.crawl.crawler import Crawler
from tests.core.test_crawler import make_site, serve


def _client(log: list[str]) -> httpx.Client:
    return httpx.Client(
        follow_redirects=True, trust_env=False, event_hooks={"request": [lambda request: log.append(request.url.path)]}
    )


def test_a_killed_crawl_resumes_where_it_stopped(tmp_path):
    site = make_site(tmp_path / "site")
    with serve(site) as (origin, _):
        state = tmp_path / "state"
        first: list[str] = []

        def killed_after_two(done: int, total: int, url: str) -> None:
            if done >= 2:
                raise KeyboardInterrupt  # as a Ctrl-C or a kill between two pages

        with pytest.raises(KeyboardInterrupt):
            Crawler(
                origin + "/docs/index.html",
                state_dir=state,
                rate=50,
                sleep=lambda s: None,
                client=_client(first),
                progress=killed_after_two,
            ).run()
        assert (state / "crawl-state.json").is_file()
        fetched_before = {p for p in first if p.endswith((".html", "/"))}
        second: list[str] = []
        report = Crawler(
            origin + "/docs/index.html", state_dir=state, rate=50, sleep=lambda s: None, client=_client(second)
        ).run()
        got = sorted(p.url.replace(origin, "") for p in report.pages)
        assert got == ["/docs/guide/", "/docs/index.html", "/docs/keys.html"]  # the same pages as one whole crawl
        assert "/docs/index.html" in fetched_before and "/docs/index.html" not in second  # not fetched again
        assert len([p for p in second if p.endswith((".html", "/"))]) < 4
