"""The chat page and the widget say plainly when an answer is not grounded in the documents (Debian's chromium
driven by Playwright, the service on loopback, a scripted model that cites nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.agent.answer.answering import ABSTAIN
from ragsieve.testing import FakeChat
from tests.support.anchor_fixtures import UNCITED
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING
from tests.support.widget_site import TIMEOUT_MS, WIDGET_ROOT, settled, widget_site

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

KEY = "pk-grounding-browser-1"
CITED = "The old secret stays valid for 24 hours and is then revoked [1]."


def scripted(messages) -> str:
    """A cited answer to the question that says "please", an answer that cites nothing to any other."""
    return CITED if "please" in messages[-1]["content"] else UNCITED


def widget_answer(site, name: str, strict: str | None):
    attrs = f' data-strict="{strict}"' if strict is not None else ""
    page = site.widget(name, "How long does the old key stay valid?", attrs)
    answer = page.locator("article.rs-answer").first
    answer.locator(".rs-sources").wait_for(timeout=TIMEOUT_MS)
    settled(page, WIDGET_ROOT)
    return answer


def test_page_and_widget_show_an_ungrounded_answer_plainly(examples_index, tmp_path):
    with widget_site(examples_index, tmp_path, FakeChat(default=scripted), KEY) as site:
        # a cited answer first: no note (the note is not shown on every answer)
        page = site.chat("How long does the old key stay valid, please?")
        grounded = page.locator("article.rs-answer").first
        grounded.locator(".rs-sources").wait_for(timeout=TIMEOUT_MS)
        settled(page)
        assert "24 hours" in grounded.locator(".rs-md").inner_text()
        assert grounded.locator(".rs-ungrounded").count() == 0
        site.chat("How long does the old key stay valid?", page)
        note = page.locator("article.rs-answer .rs-ungrounded")
        note.wait_for(timeout=TIMEOUT_MS)
        assert note.is_visible() and "Not grounded in the documents" in note.inner_text()
        assert UNCITED in page.locator("article.rs-answer .rs-md").inner_text()
        lenient = widget_answer(site, "lenient.html", "false")
        assert lenient.locator(".rs-ungrounded").is_visible() and "FIFO" in lenient.locator(".rs-md").inner_text()
        strict = widget_answer(site, "strict.html", None)  # strict by default: the abstention
        text = strict.locator(".rs-md").inner_text()
        assert text.startswith(ABSTAIN) and "FIFO" not in text and strict.locator(".rs-ungrounded").count() == 0
