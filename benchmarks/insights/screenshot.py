"""docs/insights.md's screenshot of `/insights` -> docs/insights.png, from a real run of the service and a real browser.

    .venv/bin/python -m benchmarks.insights.screenshot

The service (the same app `ragsieve serve` runs) serves an index of examples/
with insights on; a month of questions (the test suite's scripted month: 24
about billing and 6 about a mobile app, which the corpus lacks, 30 it answers)
is sent over HTTP through the OpenAI chat route, `/v1/ask` and the chat page's
API, with the scripted model (it abstains when the question is about something
the corpus lacks) and a fake clock spreading them over 30 days; one answer gets a
thumbs down. Debian's chromium (Playwright) then opens `/insights` and saves a
full-page PNG.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the tests package (tests.support)
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> int:
    import httpx

    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.embedders.local_embedder import Embedder
    from tests.support.insights_fakes import DAY, FakeClock, insights_service, month_of_questions
    from tests.support.service_fakes import sse_events
    from tests.support.web_fixtures import browser

    out = REPO / "docs" / "insights.png"
    with tempfile.TemporaryDirectory(prefix="ragsieve-insights-shot-") as tmp:
        index = Path(tmp) / "index"
        IndexBuilder(index, embedder=Embedder("sentence-transformers/all-MiniLM-L6-v2"), progress=False).build(
            [str(REPO / "examples")]
        )
        start = time.time() - 30 * DAY
        clock = FakeClock(start)
        with insights_service({"docs": index}, Path(tmp) / "data", clock, lifetime_s=900) as svc:
            page_ids = []
            for n, (day, question) in enumerate(month_of_questions()):
                clock.now = start + day * DAY + n * 600
                if n % 3 == 0:
                    r = httpx.post(
                        f"{svc.base_url}/v1/chat/completions",
                        timeout=60,
                        json={"model": "docs", "messages": [{"role": "user", "content": question}]},
                    )
                    r.raise_for_status()
                elif n % 3 == 1:
                    httpx.post(f"{svc.base_url}/v1/ask", json={"question": question}, timeout=60).raise_for_status()
                else:
                    with httpx.stream("POST", f"{svc.base_url}/ui/api/ask", json={"question": question}, timeout=60) as r:
                        done = [d for e, d in sse_events(r) if e == "done"]
                    if done and done[0]["abstention"] is None:
                        page_ids.append(done[0]["answer_id"])
            httpx.post(f"{svc.base_url}/ui/api/feedback", json={"answer_id": page_ids[0], "rating": "down"})
            with browser() as b:
                page = b.new_context(viewport={"width": 1200, "height": 900}).new_page()
                page.goto(svc.base_url + "/insights")
                page.wait_for_selector("body[data-ready=true]", timeout=120_000)
                page.screenshot(path=str(out), full_page=True)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
