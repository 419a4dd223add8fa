"""The chat page and the widget as a user drives them (issue 44 item 7), in Debian's chromium via Playwright:
Enter while an answer streams queues the new question instead of stopping the answer, the API-key field goes
once a working key is entered (and "Change API key" brings it back), and a widget with an unknown key says
so rather than blaming the origin. Scripted model (FakeChat) on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from ragsieve.testing import FakeChat
from tests.support.web_browser_setup import TIMEOUT_MS, widget_refusal
from tests.support.web_fixtures import (
    CHROMIUM,
    CHROMIUM_MISSING,
    GUIDE,
    PLAYWRIGHT_MISSING,
    browser,
    scripted_reply,
    served_ui,
    static_site,
)

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

API_KEY = "sk-page-test-key-1"


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from tests.support.web_fixtures import write_corpus

    docs = write_corpus(tmp_path_factory.mktemp("corpus"))
    index = tmp_path_factory.mktemp("index")
    IndexBuilder(index, embedder=embedder, progress=False).build([str(docs)])
    return index


def test_enter_while_an_answer_streams_queues_the_question(docs_index, tmp_path):
    chat = FakeChat(default=scripted_reply, token_delay_s=0.25)  # a slow stream: seconds of "Answering…"
    with served_ui({"docs": docs_index}, chat, tmp_path / "data") as svc, browser() as b:
        page = b.new_context(viewport={"width": 1000, "height": 800}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(svc.base_url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
        page.fill("textarea.rs-input", "How do I rotate the API key?")
        page.keyboard.press("Enter")
        first = page.locator("article.rs-answer").first
        page.wait_for_function(
            "() => document.querySelector('article.rs-answer .rs-md').textContent.length > 0", timeout=TIMEOUT_MS
        )  # tokens are arriving
        page.fill("textarea.rs-input", "What happens to the old key?")
        page.keyboard.press("Enter")
        queued = page.locator(".rs-user.rs-queued")
        assert queued.count() == 1 and "asked when the answer above is done" in queued.inner_text()
        first.locator(".rs-feedback").wait_for(timeout=TIMEOUT_MS)  # the first answer finished, not stopped
        assert "rs-stopped" not in (first.get_attribute("class") or "")
        second = page.locator("article.rs-answer").nth(1)
        second.locator(".rs-feedback").wait_for(timeout=TIMEOUT_MS)  # then the queued question was asked
        users = page.locator(".rs-user").all_inner_texts()
        assert users == ["How do I rotate the API key?", "What happens to the old key?"]
        assert page.locator(".rs-user.rs-queued").count() == 0
        asked = [m["content"] for call in chat.history for m in call["messages"] if m["role"] == "user"]
        assert any("What happens to the old key?" in a for a in asked)
        # the Stop button still stops an answer
        page.fill("textarea.rs-input", "How do I rotate the API key?")
        page.keyboard.press("Enter")
        third = page.locator("article.rs-answer").nth(2)
        page.wait_for_function(
            "() => document.querySelectorAll('article.rs-answer')[2].querySelector('.rs-md').textContent.length > 0",
            timeout=TIMEOUT_MS,
        )
        page.locator("button.rs-send").click()
        page.wait_for_function(
            "() => document.querySelectorAll('article.rs-answer')[2].classList.contains('rs-stopped')", timeout=TIMEOUT_MS
        )
        assert "Stopped" in third.inner_text()
        assert not errors


def test_the_api_key_field_goes_once_a_key_works(docs_index, tmp_path):
    chat = FakeChat(default=scripted_reply)
    with served_ui({"docs": docs_index}, chat, tmp_path / "data", keys=KeyRing({API_KEY: {"*"}})) as svc, browser() as b:
        page = b.new_context().new_page()
        failed: list[str] = []  # no request that can only fail before a key is entered (issue 55, item 10)
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("requestfailed", lambda r: failed.append(f"failed {r.url}"))
        page.goto(svc.base_url + "/")
        key_field = page.locator("#rs-key")
        key_field.wait_for(timeout=TIMEOUT_MS)
        assert "needs an API key" in page.locator("#rs-notice").inner_text()
        page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)
        assert failed == [], failed
        key_field.fill("sk-wrong")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('rs-notice').textContent.includes('not accepted')", timeout=TIMEOUT_MS
        )
        assert key_field.is_visible()
        key_field.fill(API_KEY)
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
        assert not key_field.is_visible()
        change = page.locator("#rs-keychange")
        assert change.is_visible()
        change.click()
        assert key_field.is_visible() and not change.is_visible()


def test_a_widget_with_an_unknown_key_says_so(docs_index, tmp_path):
    root = tmp_path / "site"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "guide.html").write_text(GUIDE, encoding="utf-8")
    with static_site(root, lifetime_s=300) as port:
        allowed = f"http://127.0.0.1:{port}"
        keys = WidgetKeys([WidgetKey("pk-real-widget-key", frozenset({"docs"}), frozenset({allowed}), 60)])
        chat = FakeChat(default=scripted_reply)
        with served_ui({"docs": docs_index}, chat, tmp_path / "data", widget_keys=keys) as svc, browser() as b:
            (root / "host.html").write_text(
                f'<!doctype html><html><body><script src="{svc.base_url}/widget.js" data-index="docs" '
                f'data-key="pk-typo-widget-key"></script></body></html>',
                encoding="utf-8",
            )
            refused = widget_refusal(b.new_context().new_page(), f"{allowed}/host.html")
            assert "widget key is not known" in refused and "origin" not in refused
        assert chat.history == []  # refused before the model
