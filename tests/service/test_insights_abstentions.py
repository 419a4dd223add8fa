"""Answers that cite nothing count as abstentions in the insights: the widget's strict-mode abstention
(`abstention = "ungrounded"`, the closest passages shown instead) and a non-strict answer whose grounding is
`none` are logged as `abstained_ungrounded`, grouped under the topics the documentation is missing, and rows
logged before this change (`answered` with abstention `ungrounded`) are read the same way."""

from __future__ import annotations

import httpx

from ragsieve.insights.record import Outcome, QuestionRecord, Surface
from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from tests.support.insights_fakes import ANSWERED, START, FakeClock, insights_service, scripted
from tests.support.service_fakes import sse_events

UNCITED = ["How do I export my workspace to a spreadsheet?", "Can I export my workspace as a spreadsheet file?"]


def uncited_for_exports(messages) -> str:
    """The scripted month's model, except that it answers export questions from its own knowledge (no [n])."""
    if "spreadsheet" in messages[-1]["content"].lower():
        return "Use the export button in the top right corner; it writes a CSV file."
    return scripted(messages)


def test_strict_and_ungrounded_answers_are_missing_topics(examples_index, tmp_path):
    site, key = "https://docs.example.com", "pk-insights-widget-2"
    keys = WidgetKeys([WidgetKey(key, frozenset({"lumen"}), frozenset({site}), 60, visitor_requests_per_minute=60)])
    clock = FakeClock(START)
    with insights_service({"lumen": examples_index}, tmp_path, clock, widget_keys=keys, reply=uncited_for_exports) as svc:
        widget = {"Authorization": f"Bearer {key}", "Origin": site}
        with httpx.stream("POST", f"{svc.base_url}/ui/api/ask", json={"question": UNCITED[0]}, headers=widget, timeout=60) as r:
            done = [d for e, d in sse_events(r) if e == "done"][0]
        plain = httpx.post(f"{svc.base_url}/v1/ask", json={"question": UNCITED[1], "index": "lumen"}, timeout=60)
        assert plain.status_code == 200 and plain.json()["grounding"] == "none", plain.text
        cited = httpx.post(f"{svc.base_url}/v1/ask", json={"question": ANSWERED[0], "index": "lumen"}, timeout=60)
        assert cited.json()["grounding"] == "cited"
        log = svc.registry.insights.log
        log.write(
            [
                QuestionRecord(
                    index="lumen",
                    surface=Surface.WIDGET,
                    at=clock(),
                    plan="full",  # an older row
                    outcome=Outcome.ANSWERED,
                    question=UNCITED[0],
                    latency_s=0.1,
                    abstention="ungrounded",
                )
            ]
        )
        log.flush()
        rows = {r.id: r for r in log.rows("lumen")}
        assert rows[done["answer_id"]].outcome is Outcome.ABSTAINED_UNGROUNDED
        assert [r.outcome for r in rows.values()].count(Outcome.ABSTAINED_UNGROUNDED) == 3
        report = httpx.get(f"{svc.base_url}/insights/api/report", params={"index": "lumen"}, timeout=60).json()
        assert report["totals"]["abstained_ungrounded"] == 3 and report["totals"]["answered"] == 1
        grouped = {q for g in report["groups"] for q in g["examples"]}
        assert set(UNCITED) <= grouped and ANSWERED[0] not in grouped
