"""The widget in a real browser: Debian's chromium driven by Playwright, embedded in a page of another loopback
origin, against the service with the scripted model: keyboard use, host styles kept apart, mobile width, feedback,
and the key refused on an origin it does not name (and by the server, without reaching the model). Screenshots go
to <tmp>/ragsieve-ui-screenshots/widget/ (test artefacts, not committed). The chat page: test_web_browser.py."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from ragsieve.service.feedback.store import FeedbackStore
from ragsieve.testing import FakeChat
from tests.conftest import REPO
from tests.support.web_browser_setup import TIMEOUT_MS, widget_refusal
from tests.support.web_fixtures import (
    CHROMIUM,
    CHROMIUM_MISSING,
    PLAYWRIGHT_MISSING,
    browser,
    screenshots_dir,
    scripted_reply,
    served_ui,
)

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)


WIDGET_KEY = "pk-test-widget-7f3a"


def _widget_page(root: Path, base_url: str, name: str) -> None:
    (root / name).write_text(
        f"""<!doctype html><html><head><title>Host site</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body {{ font-family: Georgia, serif; color: rgb(120, 20, 20); }} button {{ background: lime; }}</style></head>
<body><h1>A customer's documentation site</h1><p id="host-text">Host page text stays styled.</p>
<script src="{base_url}/widget.js" data-index="docs" data-key="{WIDGET_KEY}" data-title="Ask Lumen docs"></script>
</body></html>""",
        encoding="utf-8",
    )


def test_widget_on_another_origin_works_with_its_key_and_is_refused_elsewhere(ui_index, site, second_index, tmp_path):
    root, port = site
    shots = screenshots_dir("widget")
    allowed = f"http://127.0.0.1:{port}"
    keys = WidgetKeys([WidgetKey(WIDGET_KEY, frozenset({"docs"}), frozenset({allowed}), 60)])
    chat = FakeChat(default=scripted_reply, token_delay_s=0.01)
    with served_ui({"docs": ui_index, "notes": second_index}, chat, tmp_path / "data", widget_keys=keys) as svc, browser() as b:
        _widget_page(root, svc.base_url, "host.html")
        page = b.new_context(viewport={"width": 1100, "height": 800}).new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{allowed}/host.html")
        launch = page.locator("button.launch")
        launch.wait_for(timeout=TIMEOUT_MS)
        assert (
            page.evaluate("typeof window.DOMPurify + typeof window.marked + typeof window.Core") == "undefinedundefinedundefined"
        )  # the widget leaks no globals onto the host page
        assert page.locator("#host-text").evaluate("e => getComputedStyle(e).color") == "rgb(120, 20, 20)"
        assert launch.evaluate("e => getComputedStyle(e).backgroundColor") != "rgb(0, 255, 0)"  # host CSS stays out
        page.screenshot(path=str(shots / "01-closed.png"))

        # keyboard only: focus the button, open with Enter, type, send with Enter, close with Escape
        launch.focus()
        page.keyboard.press("Enter")
        assert launch.get_attribute("aria-expanded") == "true"
        assert page.evaluate("document.activeElement.shadowRoot.activeElement.className") == "rs-input"
        page.keyboard.type("How do I rotate the API key?")
        page.keyboard.press("Enter")
        answer = page.locator("article.rs-answer").first
        answer.locator(".rs-feedback").wait_for(timeout=TIMEOUT_MS)
        assert "lumen keys rotate" in answer.locator(".rs-md").inner_text()
        hrefs = [a.get_attribute("href") for a in answer.locator(".rs-sources a").all()]
        assert any(h.startswith(svc.base_url + "/ui/source?") for h in hrefs)  # absolute: opens on the server
        answer.locator("button.rs-down").click()
        page.wait_for_function(
            "() => document.querySelector('[data-ragsieve-widget]').shadowRoot"
            ".querySelector('.rs-thanks').textContent.includes('saved')"
        )
        page.screenshot(path=str(shots / "02-answered.png"))
        if os.environ.get("RAGSIEVE_UPDATE_DOCS_SCREENSHOT"):
            shutil.copy(shots / "02-answered.png", REPO / "docs" / "assistant-widget.png")
        rated = FeedbackStore.in_folder(tmp_path / "data").rated()
        assert [(r["rating"], r["via"], r["index"]) for r in rated] == [(-1, "widget:pk-test-", "docs")]
        page.keyboard.press("Escape")
        assert launch.get_attribute("aria-expanded") == "false"
        assert page.evaluate("document.activeElement.shadowRoot.activeElement.className") == "launch"

        # mobile width: the panel takes the screen width and stays usable
        phone = b.new_context(viewport={"width": 375, "height": 700}, is_mobile=True).new_page()
        phone.goto(f"{allowed}/host.html")
        phone.locator("button.launch").click()
        box = phone.locator(".panel").bounding_box()
        assert box["width"] <= 375 and box["x"] >= 0
        assert phone.locator("textarea.rs-input").bounding_box()["width"] > 200
        phone.screenshot(path=str(shots / "03-mobile.png"))
        phone.close()

        # another origin: the server refuses the key there, and the widget can read and say why
        other = f"http://localhost:{port}"
        stranger = b.new_context().new_page()
        assert "not allowed on http://localhost" in widget_refusal(stranger, f"{other}/host.html")
        stranger.screenshot(path=str(shots / "04-refused-origin.png"))
        stranger.close()
        assert not errors

    calls_before = len(chat.history)
    with served_ui({"docs": ui_index, "notes": second_index}, chat, tmp_path / "data", widget_keys=keys) as svc:
        auth = {"Authorization": f"Bearer {WIDGET_KEY}"}
        body = {"question": "How do I rotate the API key?", "index": "docs"}
        refused = httpx.post(svc.base_url + "/ui/api/ask", json=body, headers={**auth, "Origin": other})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "origin_not_allowed"
        assert refused.headers["access-control-allow-origin"] == other  # the page can read the refusal
        other_index = httpx.post(
            svc.base_url + "/ui/api/ask", json={**body, "index": "notes"}, headers={**auth, "Origin": allowed}
        )
        assert other_index.status_code == 404  # another index is invisible to the key
        assert httpx.get(svc.base_url + "/v1/models", headers=auth).status_code == 200  # open server: no key needed
        preflight = httpx.options(
            svc.base_url + "/ui/api/ask",
            headers={
                "Origin": allowed,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == allowed
        denied = httpx.options(svc.base_url + "/ui/api/ask", headers={"Origin": other, "Access-Control-Request-Method": "POST"})
        # answered (not a bare 405), so the browser sends the call and shows its refusal
        assert denied.status_code == 204 and denied.headers["access-control-allow-origin"] == other
        unknown = httpx.post(
            svc.base_url + "/ui/api/ask", json=body, headers={"Authorization": "Bearer pk-not-a-key", "Origin": allowed}
        )
        assert unknown.status_code == 401 and "widget key is not known" in unknown.json()["error"]["message"]
    assert len(chat.history) == calls_before  # refused calls never reached the model
    with sqlite3.connect(tmp_path / "data" / "feedback.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1
