"""Insights: a scripted month of traffic over the examples index, through the real surfaces (OpenAI client,
/v1/ask, the chat page's API, MCP), with a fake clock and the scripted model; then the report, its exports and
the evaluation set and the redaction in the SQLite bytes (records and retention: `test_insights_records.py`;
key scopes, logging off and the widget: `test_insights_service.py`)."""

from __future__ import annotations

import json
from datetime import timedelta

import anyio
import httpx
import pytest

from ragsieve.eval.data import load_dataset
from ragsieve.insights.log import FILE_NAME
from ragsieve.insights.record import Outcome, Surface
from tests.support.insights_fakes import (
    ANSWERED,
    BILLING,
    DAY,
    MOBILE,
    START,
    FakeClock,
    insights_service,
    month_of_questions,
    words,
)
from tests.support.service_fakes import sse_events

EMAIL, KEY, PHONE = "jane.roe@example.org", "sk-live-9f8e7d6c5b4a3210XyZqw", "+44 20 7946 0958"


PLANTED = f"How do I rotate an API key? I am {EMAIL}, call {PHONE}, my key is {KEY}"


def _ask_all(svc, questions, clock) -> dict[str, str]:
    """Each question through one surface in turn; returns the chat page's answer ids by question."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{svc.base_url}/v1", api_key="unused", max_retries=0)
    page_ids: dict[str, str] = {}
    for n, (day, question) in enumerate(questions):
        clock.now = START + day * DAY + n * 60
        surface = n % 3
        if surface == 0:
            reply = client.chat.completions.create(model="lumen", messages=[{"role": "user", "content": question}])
            assert reply.choices[0].message.content
        elif surface == 1:
            r = httpx.post(f"{svc.base_url}/v1/ask", json={"question": question, "index": "lumen"}, timeout=60)
            assert r.status_code == 200, r.text
        else:
            with httpx.stream(
                "POST", f"{svc.base_url}/ui/api/ask", json={"question": question, "index": "lumen"}, timeout=60
            ) as r:
                done = [d for e, d in sse_events(r) if e == "done"]
            assert done and done[0]["answer_id"], done
            page_ids[question] = done[0]["answer_id"]
    return page_ids


def _mcp_ask(svc, question: str) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def main():
        async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
            async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=60)) as session:
                await session.initialize()
                result = await session.call_tool("ask", {"question": question, "index": "lumen"})
                return json.loads(result.content[0].text)

    return anyio.run(main)


@pytest.fixture(scope="module")
def month(examples_index, tmp_path_factory):
    """A month of questions (fake clock), one thumbs down, one planted secret; the served report at the end."""
    data = tmp_path_factory.mktemp("insights-data")
    clock = FakeClock(START)
    with insights_service({"lumen": examples_index}, data, clock) as svc:
        questions = month_of_questions()
        page_ids = _ask_all(svc, questions, clock)
        clock.now = START + 29.5 * DAY
        assert _mcp_ask(svc, ANSWERED[0])["answer"]
        assert _mcp_ask(svc, PLANTED)["answer"]
        wrong = next(q for q in page_ids if q in ANSWERED)
        r = httpx.post(f"{svc.base_url}/ui/api/feedback", json={"answer_id": page_ids[wrong], "rating": "down"})
        assert r.status_code == 200, r.text
        report = httpx.get(f"{svc.base_url}/insights/api/report", params={"index": "lumen", "since": "30d"}, timeout=120)
        assert report.status_code == 200, report.text
        csv_text = httpx.get(f"{svc.base_url}/insights/api/export.csv", params={"index": "lumen"}, timeout=120)
        exported = httpx.post(
            f"{svc.base_url}/insights/api/export-eval",
            timeout=120,
            json={
                "index": "lumen",
                "since": "30d",
                "group": report.json()["groups"][0]["id"],
                "label": report.json()["groups"][0]["label"],
            },
        )
        rows = svc.registry.insights.log.rows("lumen")
    return {
        "data": data,
        "questions": questions,
        "report": report.json(),
        "csv": csv_text,
        "rows": rows,
        "wrong": (wrong, page_ids[wrong]),
        "exported": exported,
    }


def test_every_surface_logs_its_questions_with_outcome_and_citations(month):
    rows = month["rows"]
    assert len(rows) == len(month["questions"]) + 2
    assert {r.surface for r in rows} == {Surface.CHAT_COMPLETIONS, Surface.ASK, Surface.CHAT_PAGE, Surface.MCP}
    by_question = {r.question: r for r in rows}
    assert all(by_question[q].outcome is Outcome.ABSTAINED_MODEL for q in BILLING + MOBILE)
    assert all(by_question[q].outcome is Outcome.ANSWERED and by_question[q].citations for q in ANSWERED)
    assert all(r.answer is None for r in rows)  # no answer text unless store_answers
    assert all(r.latency_s > 0 and r.vector is not None for r in rows)  # embedded by the writer, off the request
    assert [r.at for r in rows] == sorted(r.at for r in rows) and rows[0].at == START  # the fake clock's times


def test_the_missing_topic_comes_out_as_one_group_with_its_count(month):
    groups = month["report"]["groups"]
    billing = [g for g in groups if set(g["examples"]) & set(BILLING)]
    assert len(billing) == 1, [(g["label"], g["count"]) for g in groups]
    assert billing[0]["count"] == 24 and billing[0]["label"] in BILLING
    assert set(billing[0]["examples"]) <= set(BILLING)
    mobile = [g for g in groups if set(g["examples"]) & set(MOBILE)]
    assert len(mobile) == 1 and mobile[0]["count"] == 6
    assert sum(n for _, n in billing[0]["trend"]) == 24 and len(billing[0]["trend"]) >= 4  # weekly, a month
    assert billing[0]["closest"] and all(p["source"] and p["snippet"] for p in billing[0]["closest"])
    totals = month["report"]["totals"]
    assert totals["abstained_model"] == 30 and totals["answered"] == 32 and totals["thumbs_down"] == 1


def test_thumbs_down_is_linked_by_answer_id_and_flagged(month):
    question, answer_id = month["wrong"]
    row = next(r for r in month["rows"] if r.id == answer_id)
    assert row.rating == -1 and row.question == question
    flagged = month["report"]["flagged"]
    assert [f["id"] for f in flagged] == [answer_id] and flagged[0]["why"] == "marked wrong"


def test_cited_and_unreached_documents(month):
    report = month["report"]
    assert report["most_cited"] and all(n >= 1 for _, n in report["most_cited"])
    cited = {d for d, _ in report["most_cited"]}
    assert cited.isdisjoint(report["unreached"])
    assert report["unreached_total"] == len(report["unreached"]) > 0


def test_csv_export_and_eval_set_from_a_group(month):
    csv_response = month["csv"]
    assert csv_response.status_code == 200 and "attachment" in csv_response.headers["content-disposition"]
    lines = csv_response.text.strip().splitlines()
    assert lines[0].startswith("id,at,surface") and len(lines) == len(month["rows"]) + 1
    exported = month["exported"]
    assert exported.status_code == 200, exported.text
    dataset = load_dataset(exported.json()["folder"])
    assert len(dataset.questions) == 24 and all(q.impossible for q in dataset.questions)
    assert {q.text for q in dataset.questions} == set(BILLING)


def test_redaction_keeps_planted_secrets_out_of_the_database_file(month):
    db = month["data"] / FILE_NAME
    raw = b"".join(p.read_bytes() for p in (db, db.with_name(FILE_NAME + "-wal")) if p.exists())
    assert b"rotate an API key? I am [email]" in raw  # the question is there ...
    for secret in (EMAIL, KEY, "7946 0958", "jane.roe", "9f8e7d6c5b4a"):
        assert secret.encode() not in raw  # ... its e-mail, phone and key are not, in the file or its WAL
    assert db.stat().st_mode & 0o077 == 0  # readable by the server's user only


def test_cli_reports_exports_json_csv_and_an_eval_set(month, examples_index, tmp_path, capsys):
    from ragsieve.cli.main import main

    args = ["insights", "--index", f"lumen={examples_index}", "--data-dir", str(month["data"]), "--since", "35d"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Topics the documents miss" in text and "   24  " in text
    assert main(args + ["--json", "--csv", str(tmp_path / "q.csv")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["groups"][0]["count"] == 24 and (tmp_path / "q.csv").read_text().count("\n") == len(month["rows"]) + 1
    out = tmp_path / "billing-eval"
    assert main(args + ["--export-eval", "g1", "--out", str(out)]) == 0
    assert {q.text for q in load_dataset(out).questions} == set(BILLING)
    assert words(report["groups"][0]["label"]) & {"refund", "invoices", "credit", "billing", "vat", "card"}


BILLING_PAGE = """# Billing and invoices

Invoices are in Settings > Billing; download any invoice as a PDF there. Pay by credit card or by invoice (bank
transfer). Change the billing address on future invoices under Billing details. A refund of a subscription is
possible within 14 days: write to the billing team. Every payment gets a VAT receipt. A credit card charged twice
is refunded automatically within five days.
"""


def _passage_aware(messages) -> str:
    """Answers only when a passage shown talks about billing; abstains otherwise (as a careful model would)."""
    prompt = messages[-1]["content"]
    passages = prompt.rsplit("Question:", 1)[0].lower()
    return (
        "See the billing page [1]."
        if "billing" in passages and "invoice" in passages
        else "The context does not contain the answer."
    )


def test_an_exported_group_becomes_answered_once_the_missing_page_is_indexed(month, examples_index, embedder, tmp_path):
    """The loop the export is for: today the group's questions are abstained on; the owner adds the page, re-indexes,
    and the same evaluation set shows them answered."""
    import shutil

    from ragsieve.eval.evaluate import Evaluation
    from ragsieve.testing import FakeChat
    from ragsieve.tools.index.building.builder import IndexBuilder
    from tests.conftest import EXAMPLES

    folder = month["exported"].json()["folder"]

    def abstention_rate(index_dir) -> float:
        results = Evaluation(
            folder,
            index_dir,
            plans=["fast"],
            out=tmp_path / f"eval-{index_dir.name}",
            chat=FakeChat(default=_passage_aware),
            cache=False,
            progress=False,
        ).run()
        return results["plans"]["fast"]["answers"]["abstain_correct"]

    assert abstention_rate(examples_index) == 1.0  # every question of the group is abstained on today
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    (docs / "docs" / "billing.md").write_text(BILLING_PAGE, encoding="utf-8")
    fixed = tmp_path / "fixed-index"
    IndexBuilder(fixed, embedder=embedder, progress=False).build([str(docs)])
    assert abstention_rate(fixed) <= 0.25  # after the page: the group is answered
