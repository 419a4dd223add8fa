"""The insights page in Chromium lists a question flagged many times once (with its count), names uploaded
documents by their file name, sorts closest passages by similarity and shows "quoted passages" only when some
reply quoted them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragsieve.insights.record import Outcome, QuestionRecord, Surface
from tests.support.insights_fakes import DAY, START, FakeClock, insights_service
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING, browser

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)

UPLOAD = "file-0123456789abcdef01234567/pricing.md"
FLAGGED = "What does the team plan cost per seat?"


def _logged(clock: FakeClock) -> list[QuestionRecord]:
    cite = [{"chunk_id": f"{UPLOAD}#0", "source": UPLOAD, "cited": True}]
    rows = [
        QuestionRecord(
            index="lumen",
            surface=Surface.ASK,
            at=clock() + n * 60,
            plan="fast",
            outcome=Outcome.ANSWERED,
            question=FLAGGED if n % 2 else FLAGGED.lower(),
            latency_s=0.1,
            rating=-1,
            citations=cite,
        )
        for n in range(6)
    ]
    rows.append(
        QuestionRecord(
            index="lumen",
            surface=Surface.ASK,
            at=clock() + 600,
            plan="fast",
            outcome=Outcome.ABSTAINED_MODEL,
            question="How do I get a refund?",
            latency_s=0.1,
        )
    )
    return rows


def test_the_page_groups_flagged_questions_and_names_uploads(examples_index, tmp_path):
    clock = FakeClock(START + DAY)
    with insights_service({"lumen": examples_index}, tmp_path, clock) as svc:
        svc.registry.insights.log.write(_logged(clock))
        clock.advance(DAY)
        report = httpx.get(f"{svc.base_url}/insights/api/report", params={"index": "lumen"}, timeout=60).json()
        (flagged,) = report["flagged"]
        assert flagged["count"] == 6 and len(flagged["ids"]) == 6
        cosines = [p["cosine"] for g in report["groups"] for p in g["closest"]]
        assert cosines and cosines == sorted(cosines, reverse=True)
        with browser() as b:
            page = b.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(svc.base_url + "/insights")
            page.wait_for_selector("body[data-ready=true]", timeout=60_000)
            rows = page.locator("#ri-flagged tbody tr")
            assert rows.count() == 1 and "×6" in rows.first.inner_text()
            cited = page.locator("#ri-cited tbody tr").first.inner_text()
            assert cited.startswith("pricing.md") and "file-0123" not in cited
            assert "quoted passages" not in page.locator("#ri-totals").inner_text()
