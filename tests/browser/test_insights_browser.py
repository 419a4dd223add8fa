"""The insights page in a real browser (Debian's chromium via Playwright): it renders the groups of a logged
month, filters them, exports a group, and shows hostile question text as text (no script runs)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.insights_fakes import BILLING, DAY, MOBILE, FakeClock, insights_service
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING, browser, screenshots_dir

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> refund "><svg onload="window.__pwned=3">'
TIMEOUT_MS = 60_000


def test_insights_page_renders_filters_exports_and_keeps_hostile_text_inert(examples_index, tmp_path):
    import time

    clock = FakeClock(time.time() - 20 * DAY)
    with insights_service({"lumen": examples_index}, tmp_path, clock) as svc:
        for n, question in enumerate(BILLING * 2 + MOBILE * 2 + [HOSTILE, "How do I rotate an API key?"]):
            clock.advance(DAY / 2)
            r = httpx.post(f"{svc.base_url}/v1/ask", json={"question": question, "index": "lumen"}, timeout=60)
            assert r.status_code == 200, (n, r.text)
        shots = screenshots_dir("insights-page")
        with browser() as b:
            page = b.new_context(viewport={"width": 1200, "height": 900}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(svc.base_url + "/insights")
            page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
            page.screenshot(path=str(shots / "1-report.png"), full_page=True)
            groups = page.locator("article.ri-group")
            assert groups.count() >= 2
            labels = groups.locator(".ri-label").all_inner_texts()
            assert any(label in BILLING for label in labels) and any(label in MOBILE for label in labels)
            totals = page.locator("#ri-totals").inner_text()
            assert "18\nquestions" in totals and "17\nabstained (model)" in totals and "1\nanswered\n" in totals
            # hostile text is shown as text, nothing it carries runs or becomes an element
            assert page.get_by_text("window.__pwned=2", exact=False).count() >= 1
            assert page.evaluate("window.__pwned") is None
            assert page.locator("#ri-main img, #ri-main script, #ri-main svg").count() == 0
            # the filter keeps only the rows that hold its words
            page.fill("#ri-filter", "iphone")
            visible = [g for g in groups.all() if g.is_visible()]
            assert len(visible) == 1 and visible[0].locator(".ri-label").inner_text() in MOBILE
            page.screenshot(path=str(shots / "2-filtered.png"), full_page=True)
            page.fill("#ri-filter", "")
            assert sum(g.is_visible() for g in groups.all()) == groups.count()
            # one click writes the group as an evaluation set
            first = groups.first
            first.locator("button.ri-export").click()
            # a selector, not wait_for_function: the page's CSP (script-src 'self') forbids evaluating a string
            page.wait_for_selector(".ri-done:not(:empty)", timeout=TIMEOUT_MS)
            done = first.locator(".ri-done").inner_text()
            assert done.startswith("Written: ") and "ragsieve eval" in done, done
            folder = Path(done.split("Written: ", 1)[1].split(" — ", 1)[0])
            assert (folder / "qa.jsonl").is_file() and (folder / "queries.jsonl").read_text().count("\n") >= 2
            assert page.evaluate("window.__pwned") is None and not errors, errors
