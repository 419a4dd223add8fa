"""First-run rough edges on the pages (issue 55, item 10), in Debian's chromium driven by Playwright: a dunder
name renders as code, not bold; the widget shows an abstention's closest passages as separate items."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.testing import FakeChat
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING
from tests.support.widget_site import WIDGET_ROOT, settled, widget_site

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

KEY = "pk-first-run-pages-1"
DUNDER = "Rotate keys in the client's __init__ (see obj.__dict__ too) [1]."
UNCITED = "Tea is served at four o'clock in the garden pavilion."  # cites nothing: strict abstains


def scripted(messages) -> str:
    return DUNDER if "dunder" in messages[-1]["content"] else UNCITED


def test_dunders_render_as_code_and_closest_passages_as_items(examples_index, tmp_path):
    with widget_site(examples_index, tmp_path, FakeChat(default=scripted), KEY) as site:
        page = site.chat("Where do I rotate keys, dunder style?")
        settled(page)
        body = page.locator("article.rs-answer .rs-md").first
        codes = body.locator("code").all_inner_texts()
        assert "__init__" in codes and "obj.__dict__" in codes, codes
        assert body.locator("strong").count() == 0  # not bold "init"
        assert body.locator("a.rs-cite").count() == 1  # citations still link
        host = site.widget("host.html", "How long does the old key stay valid?")
        settled(host, WIDGET_ROOT)
        paragraphs = host.locator("article.rs-answer .rs-md p").all_inner_texts()
        items = [p for p in paragraphs if p.startswith("[")]
        assert len(items) >= 2, paragraphs  # each closest passage its own item, not one run-on paragraph
        assert [p[:3] for p in items] == [f"[{n}]" for n in range(1, len(items) + 1)]
