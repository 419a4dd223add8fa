"""First-run rough edges on the pages (issue 55, item 10), in Debian's chromium driven by Playwright: a dunder
name renders as code, not bold; the widget shows an abstention's closest passages as separate items."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from ragsieve.testing import FakeChat
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING, browser, served_ui, static_site

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

KEY = "pk-first-run-pages-1"
TIMEOUT_MS = 60_000
DUNDER = "Rotate keys in the client's __init__ (see obj.__dict__ too) [1]."
UNCITED = "Tea is served at four o'clock in the garden pavilion."  # cites nothing: strict abstains


def scripted(messages) -> str:
    return DUNDER if "dunder" in messages[-1]["content"] else UNCITED


def settled(page, root_js: str) -> None:
    page.wait_for_function(
        f"() => {{ const a = {root_js}.querySelector('article.rs-answer'); "
        "return a && a.getAttribute('aria-busy') === 'false'; }",
        timeout=TIMEOUT_MS,
    )


def test_dunders_render_as_code_and_closest_passages_as_items(examples_index, tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    with static_site(root) as port, browser() as b:
        origin = f"http://127.0.0.1:{port}"
        keys = WidgetKeys([WidgetKey(KEY, frozenset({"demo"}), frozenset({origin}), 60)])
        with served_ui({"demo": examples_index}, FakeChat(default=scripted), tmp_path / "data", widget_keys=keys) as svc:
            page = b.new_page()
            page.goto(svc.base_url + "/")
            page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
            page.fill("textarea.rs-input", "Where do I rotate keys, dunder style?")
            page.keyboard.press("Enter")
            settled(page, "document")
            body = page.locator("article.rs-answer .rs-md").first
            codes = body.locator("code").all_inner_texts()
            assert "__init__" in codes and "obj.__dict__" in codes, codes
            assert body.locator("strong").count() == 0  # not bold "init"
            assert body.locator("a.rs-cite").count() == 1  # citations still link
            (root / "host.html").write_text(
                f"""<!doctype html><html><head><title>Host</title></head><body><h1>Docs</h1><script
src="{svc.base_url}/widget.js" data-index="demo" data-key="{KEY}"></script></body></html>""",
                encoding="utf-8",
            )
            host = b.new_page()
            host.goto(f"{origin}/host.html")
            host.locator("button.launch").click(timeout=TIMEOUT_MS)
            host.locator("textarea.rs-input").fill("How long does the old key stay valid?")
            host.keyboard.press("Enter")
            settled(host, "document.querySelector('[data-ragsieve-widget]').shadowRoot")
            paragraphs = host.locator("article.rs-answer .rs-md p").all_inner_texts()
            items = [p for p in paragraphs if p.startswith("[")]
            assert len(items) >= 2, paragraphs  # each closest passage its own item, not one run-on paragraph
            assert [p[:3] for p in items] == [f"[{n}]" for n in range(1, len(items) + 1)]
