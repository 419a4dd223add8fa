"""The chat page and the widget say plainly when an answer is not grounded in the documents (Debian's chromium
driven by Playwright, the service on loopback, a scripted model that cites nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.agent.answer.answering import ABSTAIN
from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from ragsieve.testing import FakeChat
from tests.support.anchor_fixtures import UNCITED
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING, browser, served_ui, static_site

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

KEY = "pk-grounding-browser-1"
TIMEOUT_MS = 60_000
CITED = "The old secret stays valid for 24 hours and is then revoked [1]."


def scripted(messages) -> str:
    """A cited answer to the question that says "please", an answer that cites nothing to any other."""
    return CITED if "please" in messages[-1]["content"] else UNCITED


def host_page(root: Path, name: str, base_url: str, strict: str | None) -> None:
    attr = f' data-strict="{strict}"' if strict is not None else ""
    (root / name).write_text(
        f"""<!doctype html><html><head><title>Host</title></head><body><h1>Docs</h1>
<script src="{base_url}/widget.js" data-index="demo" data-key="{KEY}"{attr}></script></body></html>""",
        encoding="utf-8",
    )


def widget_answer(page, url: str):
    page.goto(url)
    page.locator("button.launch").click(timeout=TIMEOUT_MS)
    page.locator("textarea.rs-input").fill("How long does the old key stay valid?")
    page.keyboard.press("Enter")
    answer = page.locator("article.rs-answer").first
    answer.locator(".rs-sources").wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => document.querySelector('[data-ragsieve-widget]').shadowRoot"
        ".querySelector('article.rs-answer').getAttribute('aria-busy') === 'false'",
        timeout=TIMEOUT_MS,
    )
    return answer


def test_page_and_widget_show_an_ungrounded_answer_plainly(examples_index, tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    with static_site(root) as port, browser() as b:
        origin = f"http://127.0.0.1:{port}"
        keys = WidgetKeys([WidgetKey(KEY, frozenset({"demo"}), frozenset({origin}), 60)])
        with served_ui({"demo": examples_index}, FakeChat(default=scripted), tmp_path / "data", widget_keys=keys) as svc:
            page = b.new_page()
            page.goto(svc.base_url + "/")
            page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
            page.fill("textarea.rs-input", "How long does the old key stay valid, please?")
            page.keyboard.press("Enter")  # a cited answer first: no note (the note is not shown on every answer)
            grounded = page.locator("article.rs-answer").first
            grounded.locator(".rs-sources").wait_for(timeout=TIMEOUT_MS)
            page.wait_for_function(
                "() => document.querySelector('article.rs-answer').getAttribute('aria-busy') === 'false'", timeout=TIMEOUT_MS
            )
            assert "24 hours" in grounded.locator(".rs-md").inner_text()
            assert grounded.locator(".rs-ungrounded").count() == 0
            page.reload()
            page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
            page.fill("textarea.rs-input", "How long does the old key stay valid?")
            page.keyboard.press("Enter")
            note = page.locator("article.rs-answer .rs-ungrounded")
            note.wait_for(timeout=TIMEOUT_MS)
            assert note.is_visible() and "Not grounded in the documents" in note.inner_text()
            assert UNCITED in page.locator("article.rs-answer .rs-md").inner_text()
            host_page(root, "lenient.html", svc.base_url, "false")
            host_page(root, "strict.html", svc.base_url, None)
            lenient = widget_answer(b.new_page(), f"{origin}/lenient.html")
            assert lenient.locator(".rs-ungrounded").is_visible() and "FIFO" in lenient.locator(".rs-md").inner_text()
            strict = widget_answer(b.new_page(), f"{origin}/strict.html")  # strict by default: the abstention
            text = strict.locator(".rs-md").inner_text()
            assert text.startswith(ABSTAIN) and "FIFO" not in text and strict.locator(".rs-ungrounded").count() == 0
