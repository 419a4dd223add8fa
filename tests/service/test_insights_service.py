"""Question logging in the service: who may read insights, logging off, the indexes named, bad settings and
the widget's questions."""

from __future__ import annotations

import httpx
import pytest

from ragsieve import Config
from ragsieve.insights.record import Outcome, Surface
from ragsieve.service.auth.keys import KeyRing
from tests.support.insights_fakes import ANSWERED, BILLING, START, FakeClock, insights_service
from tests.support.service_fakes import sse_events


def test_admin_scope_is_needed_for_insights(examples_index, tmp_path):
    keys = KeyRing({"sk-reader-0001": {"lumen"}, "sk-writer-0001": {"lumen:write"}, "sk-owner-0001": {"lumen:admin"}})
    with insights_service({"lumen": examples_index}, tmp_path, FakeClock(START), keys=keys) as svc:
        url = f"{svc.base_url}/insights/api/report"
        assert httpx.get(url, params={"index": "lumen"}).status_code == 401
        for key in ("sk-reader-0001", "sk-writer-0001"):
            for path in ("/insights/api/report", "/insights/api/indexes", "/insights/api/export.csv"):
                r = httpx.get(svc.base_url + path, params={"index": "lumen"}, headers={"Authorization": f"Bearer {key}"})
                assert r.status_code == 403, (key, path, r.text)
        owner = httpx.get(url, params={"index": "lumen"}, headers={"Authorization": "Bearer sk-owner-0001"})
        assert owner.status_code == 200 and owner.json()["totals"]["questions"] == 0
        page = httpx.get(f"{svc.base_url}/insights")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]


def test_logging_off_writes_nothing(examples_index, tmp_path):
    off = Config()
    with insights_service({"lumen": examples_index}, tmp_path, FakeClock(START), config=off) as svc:
        assert svc.registry.insights is None
        r = httpx.post(f"{svc.base_url}/v1/ask", json={"question": BILLING[0], "index": "lumen"}, timeout=60)
        assert r.status_code == 200
        assert httpx.get(f"{svc.base_url}/insights/api/report", params={"index": "lumen"}).status_code == 404
    assert not list(tmp_path.glob("insights*"))


def test_insights_only_for_the_indexes_named(examples_index, second_index, tmp_path):
    config = Config.model_validate({"insights": {"enabled": True, "indexes": ["notes"]}})
    with insights_service({"lumen": examples_index, "notes": second_index}, tmp_path, FakeClock(START), config=config) as svc:
        httpx.post(f"{svc.base_url}/v1/ask", json={"question": ANSWERED[0], "index": "lumen"}, timeout=60)
        httpx.post(f"{svc.base_url}/v1/ask", json={"question": "When is the tea ceremony?", "index": "notes"}, timeout=60)
        svc.registry.insights.log.flush()
        assert [r.index for r in svc.registry.insights.log.rows()] == ["notes"]


def test_insights_refuse_bad_settings(examples_index, tmp_path):
    from ragsieve.agent.errors import UsageError

    bad = Config.model_validate({"insights": {"enabled": True, "indexes": ["nope"]}})
    with (
        pytest.raises(UsageError, match="unknown index"),
        insights_service({"lumen": examples_index}, tmp_path, FakeClock(START), config=bad),
    ):
        pass


def test_widget_questions_and_their_feedback_are_logged_as_widget(examples_index, tmp_path):
    from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys

    site, key = "https://docs.example.com", "pk-insights-widget-1"
    keys = WidgetKeys([WidgetKey(key, frozenset({"lumen"}), frozenset({site}), 30, visitor_requests_per_minute=30)])
    with insights_service({"lumen": examples_index}, tmp_path, FakeClock(START), widget_keys=keys) as svc:
        headers = {"Authorization": f"Bearer {key}", "Origin": site}
        with httpx.stream("POST", f"{svc.base_url}/ui/api/ask", json={"question": BILLING[0]}, headers=headers, timeout=60) as r:
            done = [d for e, d in sse_events(r) if e == "done"][0]
        rated = httpx.post(
            f"{svc.base_url}/ui/api/feedback", headers=headers, json={"answer_id": done["answer_id"], "rating": "up"}
        )
        assert rated.status_code == 200, rated.text
        svc.registry.insights.log.flush()
        (row,) = svc.registry.insights.log.rows("lumen")
        assert row.surface is Surface.WIDGET and row.id == done["answer_id"] and row.rating == 1
        assert row.outcome is Outcome.ABSTAINED_MODEL
