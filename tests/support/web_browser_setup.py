"""Shared by the test_web_browser* files (a helper module, not a test file): the guide page served on its own
loopback origin, the index built over the small corpus and that crawled page, asking on the chat page, and a
question the widget refuses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.support.web_fixtures import GUIDE, static_site, write_corpus

TIMEOUT_MS = 60_000


@contextlib.contextmanager
def guide_site(tmp_path_factory) -> Iterator[tuple[Path, int]]:
    """A static site on its own loopback origin (root, port): the crawled guide page; the widget tests add the
    pages that embed the widget."""
    root = tmp_path_factory.mktemp("site")
    (root / "docs").mkdir()
    (root / "docs" / "guide.html").write_text(GUIDE, encoding="utf-8")
    with static_site(root, lifetime_s=900) as port:
        yield root, port


def build_ui_index(tmp_path_factory, port: int, embedder) -> Path:
    """The small corpus and the guide page crawled from the site at `port`, indexed."""
    from ragsieve.tools.index.building.builder import IndexBuilder

    folder = tmp_path_factory.mktemp("ui-corpus")
    docs = write_corpus(folder)
    index = tmp_path_factory.mktemp("ui-index")
    IndexBuilder(index, embedder=embedder, progress=False).build(
        [str(docs), f"http://127.0.0.1:{port}/docs/guide.html"], crawl={"max_pages": 3, "rate": 50}
    )
    return index


def ask(page, question: str, answers_before: int):
    page.fill("textarea.rs-input", question)
    page.keyboard.press("Enter")
    page.wait_for_selector(f"article.rs-answer >> nth={answers_before}", timeout=TIMEOUT_MS)
    answer = page.locator("article.rs-answer").nth(answers_before)
    return answer


def widget_refusal(page, host_url: str, question: str = "How do I rotate the API key?") -> str:
    """Open the widget on `host_url`, ask, and return the text of the failed answer it shows (a refused key)."""
    page.goto(host_url)
    page.locator("button.launch").click()
    page.fill("textarea.rs-input", question)
    page.keyboard.press("Enter")
    failed = page.locator("article.rs-failed")
    failed.wait_for(timeout=TIMEOUT_MS)
    return failed.inner_text()
