"""One setup for the tests that ask through both the chat page and the widget (a helper module, not a test file):
Debian's chromium, a static host site on loopback, and the service with a widget key for that site's origin."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from tests.support.web_fixtures import browser, served_ui, static_site

TIMEOUT_MS = 60_000
WIDGET_ROOT = "document.querySelector('[data-ragsieve-widget]').shadowRoot"


def settled(page: Any, root_js: str = "document") -> None:
    """Until the first answer under `root_js` has finished streaming."""
    page.wait_for_function(
        f"() => {{ const a = {root_js}.querySelector('article.rs-answer'); "
        "return a && a.getAttribute('aria-busy') === 'false'; }",
        timeout=TIMEOUT_MS,
    )


@dataclass
class Site:
    browser: Any
    base_url: str  # the service
    origin: str  # the host site
    root: Path
    key: str

    def chat(self, question: str, page: Any = None) -> Any:
        """`question` asked on the chat page: a new page, or `page` reloaded; returns the page."""
        if page is None:
            page = self.browser.new_page()
            page.goto(self.base_url + "/")
        else:
            page.reload()
        page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
        page.fill("textarea.rs-input", question)
        page.keyboard.press("Enter")
        return page

    def host(self, name: str, attrs: str = "") -> str:
        """A host page embedding the widget (`attrs`: more attributes of its script tag); returns its URL."""
        (self.root / name).write_text(
            f"""<!doctype html><html><head><title>Host</title></head><body><h1>Docs</h1>
<script src="{self.base_url}/widget.js" data-index="demo" data-key="{self.key}"{attrs}></script></body></html>""",
            encoding="utf-8",
        )
        return f"{self.origin}/{name}"

    def widget(self, name: str, question: str, attrs: str = "") -> Any:
        """`question` asked in the widget of a new host page; returns the page."""
        page = self.browser.new_page()
        page.goto(self.host(name, attrs))
        page.locator("button.launch").click(timeout=TIMEOUT_MS)
        page.locator("textarea.rs-input").fill(question)
        page.keyboard.press("Enter")
        return page


@contextlib.contextmanager
def widget_site(index: Path, tmp_path: Path, chat: Any, key: str) -> Iterator[Site]:
    root = tmp_path / "site"
    root.mkdir()
    with static_site(root) as port, browser() as b:
        origin = f"http://127.0.0.1:{port}"
        keys = WidgetKeys([WidgetKey(key, frozenset({"demo"}), frozenset({origin}), 60)])
        with served_ui({"demo": index}, chat, tmp_path / "data", widget_keys=keys) as svc:
            yield Site(b, svc.base_url, origin, root, key)
