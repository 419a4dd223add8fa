"""Grounding is visible: a scripted model that cites nothing gives a not-grounded answer on every surface
(the `openai` SDK, streamed and not; `/v1/ask`; the `mcp` client; the page's and the widget's API), `strict`
replaces it by the abstention with the closest passages (on by default for the widget), the trace counts only
the markers the answer contains, and the feedback export keeps only cited passages and no abstention."""

from __future__ import annotations

import json

import anyio
import httpx
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from ragsieve.agent.answer.answering import ABSTAIN, CLOSEST_INTRO
from ragsieve.agent.answer.grounding import NOT_GROUNDED_NOTE
from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
from ragsieve.service.feedback.export import export
from ragsieve.service.feedback.store import FeedbackStore
from ragsieve.testing import FakeChat
from tests.support.anchor_fixtures import QUESTION, UNCITED
from tests.support.service_fakes import sse_events
from tests.support.web_fixtures import served_ui

KEY, SITE = "pk-grounding-1", "https://docs.example.com"


def chat_text(c: openai.OpenAI, stream: bool, **extra) -> tuple[str, dict]:
    messages = [{"role": "user", "content": QUESTION}]
    if not stream:
        reply = c.chat.completions.create(model="demo", messages=messages, extra_body=extra or None)
        return reply.choices[0].message.content or "", reply.model_extra["ragsieve"]
    parts, ext = [], {}
    for chunk in c.chat.completions.create(model="demo", messages=messages, stream=True, extra_body=extra or None):
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            ext = chunk.model_extra.get("ragsieve") or ext
    return "".join(parts), ext


def ui_done(url: str, headers: dict, **extra) -> tuple[dict, str]:
    with httpx.stream("POST", url + "/ui/api/ask", json={"question": QUESTION, **extra}, headers=headers, timeout=60) as resp:
        events = sse_events(resp)
    assert events[-1][0] == "done", events[-1]
    return events[-1][1], "".join(e[1]["text"] for e in events if e[0] == "token")


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
def test_an_answer_citing_nothing_is_marked_on_every_surface(examples_index, tmp_path):
    keys = WidgetKeys([WidgetKey(KEY, frozenset({"demo"}), frozenset({SITE}), 100, visitor_requests_per_minute=100)])
    with served_ui(
        {"demo": examples_index}, FakeChat(default=UNCITED, token_delay_s=0.001), tmp_path / "data", widget_keys=keys
    ) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
        whole, ext = chat_text(c, stream=False)
        streamed, streamed_ext = chat_text(c, stream=True)
        assert streamed == whole and whole.startswith(UNCITED + f"\n\n*{NOT_GROUNDED_NOTE}*")
        assert (ext["grounding"], ext["grounded"]) == (streamed_ext["grounding"], streamed_ext["grounded"]) == ("none", False)
        assert all(not x["cited"] for x in ext["citations"])  # listed as retrieved, never as cited
        asked = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60).json()
        assert (asked["answer"], asked["grounding"], asked["grounded"]) == (UNCITED, "none", False)
        answer_step = [e for e in asked["trace"] if e["step"] == "answer"][-1]
        assert answer_step["summary"]["cited"] == []  # the trace counts only markers the answer contains

        async def mcp_ask() -> dict:
            async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    return json.loads((await session.call_tool("ask", {"question": QUESTION})).content[0].text)

        assert anyio.run(mcp_ask)["grounding"] == "none"
        page, _ = ui_done(svc.base_url, {})
        assert (page["answer"], page["grounding"], page["grounded"]) == (UNCITED, "none", False)
        widget = {"Authorization": f"Bearer {KEY}", "Origin": SITE}
        strict, tokens = ui_done(svc.base_url, widget)  # strict by default for the widget
        assert strict["abstention"] == "ungrounded" and strict["grounding"] == "abstained"
        assert strict["answer"].startswith(ABSTAIN + "\n\n" + CLOSEST_INTRO) and "FIFO" not in tokens
        assert tokens == strict["answer"]  # the model's text was never streamed
        assert [e for e in strict["trace"] if e["step"] == "answer"][-1]["summary"]["cited"] == []  # listed only
        lenient, _ = ui_done(svc.base_url, widget, strict=False)
        assert lenient["grounding"] == "none" and lenient["answer"] == UNCITED
        strict_whole, strict_ext = chat_text(c, stream=False, strict=True)
        strict_streamed, _ = chat_text(c, stream=True, strict=True)
        assert strict_streamed == strict_whole and strict_whole.startswith(ABSTAIN) and "FIFO" not in strict_whole
        assert strict_ext["abstention"] == "ungrounded" and NOT_GROUNDED_NOTE not in strict_whole
        # the closest passages an abstention lists are not its citations: no `url_citation` annotation (Open WebUI
        # would show them as the answer's sources) and `cited` false on every surface
        assert strict_ext["citations"] and not any(x["cited"] for x in strict_ext["citations"])
        reply = c.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": QUESTION}], extra_body={"strict": True}
        )
        assert reply.choices[0].message.content.startswith(ABSTAIN) and not reply.choices[0].message.annotations
        assert not any(x["cited"] for x in strict["citations"])


def test_feedback_export_keeps_cited_passages_and_no_abstention(examples_index, tmp_path):
    from ragsieve.tools.index.engines.open import open_index

    store = FeedbackStore.in_folder(tmp_path / "data")
    cited = {"number": 1, "chunk_id": "examples/docs/api-keys.md#0", "cited": True}
    listed = {"number": 2, "chunk_id": "examples/docs/webhooks.md#0", "cited": False}
    unmarked = {"number": 3, "chunk_id": "examples/docs/configuration.md#0", "cited": True}
    ids = [
        store.record_answer(
            index="demo", plan="fast", asked=q, question=q, answer=a, citations=cs, trace=t, history=[], via="page"
        )
        for q, a, cs, t in [
            ("How do I rotate a key?", "Rotate it [1].", [cited, listed, unmarked], [{"step": "answer", "summary": {}}]),
            (
                "What is the tea rota?",
                f"{ABSTAIN}\n\n{CLOSEST_INTRO}\n[1] ...",
                [cited],
                [{"step": "answer", "summary": {"abstention": "model"}}],
            ),
            ("Who wrote it?", UNCITED, [listed], [{"step": "answer", "summary": {}}]),
        ]
    ]
    for answer_id in ids:
        store.rate(answer_id, 1, "helpful")
    index = open_index(examples_index)
    try:
        counts = export(store.rated(index="demo"), index.store, tmp_path / "out")
    finally:
        index.close()
    qrels = (tmp_path / "out" / "qrels" / "test.tsv").read_text().splitlines()[1:]
    qa = [json.loads(line) for line in (tmp_path / "out" / "qa.jsonl").read_text().splitlines()]
    assert [line.split("\t")[1] for line in qrels] == ["examples/docs/api-keys.md"]  # not the listed/unmarked ones
    assert [q["answers"] for q in qa] == [["Rotate it [1]."]] and counts["abstentions"] == 1
