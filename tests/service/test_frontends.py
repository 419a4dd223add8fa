"""Chat front ends' requests replayed against `serve`: Open WebUI (default settings: a question, a follow-up
and their background tasks), LibreChat and the Vercel AI SDK. The fixtures are request bodies built from
those clients' source (tests/fixtures/frontends/build_fixtures.py says from which files); each must get
what its client expects: a streamed answer with citations, a short title, JSON tags... and the background
tasks no retrieval and no LLM call."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from ragsieve.service.chat.frontend_tasks import PASSTHROUGH_MODEL
from ragsieve.testing import FakeChat
from tests.support.service_fakes import ANSWER, served

FIXTURES = Path(__file__).parents[1] / "fixtures" / "frontends"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def post(svc, body: dict) -> httpx.Response:
    return httpx.post(svc.base_url + "/v1/chat/completions", json=body, timeout=60)


def sse(response: httpx.Response) -> tuple[str, list[dict]]:
    chunks = [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line.strip() != "data: [DONE]"
    ]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    return text, chunks


@pytest.fixture(scope="module")
def svc(examples_index):
    with served({"demo": examples_index}, FakeChat(default=ANSWER)) as s:
        yield s


def no_retrieval(svc, monkeypatch):
    orch = svc.registry.orchestrators["demo"]

    def refuse(*a, **k):
        raise AssertionError("a background task ran retrieval")

    monkeypatch.setattr(orch.retriever, "run", refuse)
    return len(svc.chat.history)


@pytest.mark.parametrize(
    "name, key, check",
    [
        ("openwebui_title", "title", lambda v: isinstance(v, str) and 1 <= len(v.split()) <= 5),
        ("openwebui_tags", "tags", lambda v: isinstance(v, list) and 1 <= len(v) <= 6),
        ("openwebui_follow_ups", "follow_ups", lambda v: v == []),
        ("openwebui_queries", "queries", lambda v: v == ["How do I rotate the API key of a Lumen workspace?"]),
        ("openwebui_autocomplete", "text", lambda v: v == ""),
        ("openwebui_tool_selection", "tool_calls", lambda v: v == []),
        ("openwebui_follow_up_tags", "tags", lambda v: isinstance(v, list) and v),
        (
            "openwebui_follow_up_queries",
            "queries",
            lambda v: v[0] == "And what happens to the old one after that?" and "rotate" in v[1],
        ),
    ],
)
def test_open_webui_background_tasks_get_their_json_without_retrieval(svc, monkeypatch, name, key, check):
    calls = no_retrieval(svc, monkeypatch)
    r = post(svc, fixture(name))
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["message"]["content"]
    assert check(json.loads(content)[key]), content  # Open WebUI parses the JSON object it asked for
    assert r.headers["x-ragsieve-task"] and r.json()["ragsieve"]["retrieval"] is False
    assert len(svc.chat.history) == calls  # no LLM call either


def test_open_webui_title_is_short_and_about_the_question(svc, monkeypatch):
    no_retrieval(svc, monkeypatch)
    title = json.loads(post(svc, fixture("openwebui_title")).json()["choices"][0]["message"]["content"])["title"]
    assert title == "Rotate API Key Lumen Workspace"


def test_open_webui_emoji_and_librechat_title_are_plain_text(svc, monkeypatch):
    no_retrieval(svc, monkeypatch)
    assert post(svc, fixture("openwebui_emoji")).json()["choices"][0]["message"]["content"] == "\U0001f4ac"
    r = post(svc, fixture("librechat_title"))
    assert r.headers["x-ragsieve-task"] == "title"
    assert r.json()["choices"][0]["message"]["content"] == "Rotate API Key Lumen Workspace"


def test_open_webui_question_with_its_default_tools_is_answered_and_streamed(svc):
    r = post(svc, fixture("openwebui_question"))
    assert r.status_code == 200, r.text
    assert "tools" in r.headers["x-ragsieve-ignored-fields"].split(",")
    text, chunks = sse(r)
    assert text.startswith("Rotate it with `lumen keys rotate` [1]") and "**Sources**" in text
    finals = [c for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]
    assert finals[0]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] > 0  # stream_options.include_usage honoured
    cites = [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("annotations")]
    assert [a["url_citation"]["title"][:3] for a in cites[0]["choices"][0]["delta"]["annotations"]][:2] == ["[1]", "[2]"]


def test_open_webui_follow_up_keeps_the_users_words_for_the_answer(svc):
    before = len(svc.chat.history)
    svc.chat.push("What happens to the old API key after a Lumen key is rotated?", ANSWER)
    r = post(svc, fixture("openwebui_follow_up_question"))
    assert r.status_code == 200, r.text
    text, chunks = sse(r)
    assert "[1]" in text
    rewrite, answer = svc.chat.history[before : before + 2]
    assert "And what happens to the old one after that?" in rewrite["messages"][-1]["content"]
    sent = answer["messages"]
    assert sent[0] == {"role": "user", "content": "How do I rotate the API key of a Lumen workspace?"}
    assert sent[1]["role"] == "assistant"
    assert "And what happens to the old one after that?" in sent[-1]["content"]  # the user's own words
    assert "What happens to the old API key after a Lumen key is rotated?" in sent[-1]["content"]


@pytest.mark.parametrize("name", ["librechat_question", "aisdk_question"])
def test_librechat_and_ai_sdk_questions_are_answered(svc, name):
    r = post(svc, fixture(name))
    assert r.status_code == 200, r.text
    text, _ = sse(r)
    assert text.startswith("Rotate it with") and "[2]" in text


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "search_chats"}}}, "tool_choice"),
        ({"n": 2}, "n"),
    ],
)
def test_what_cannot_be_honoured_is_refused_with_the_field_named(svc, extra, param):
    body = fixture("aisdk_question") | {"stream": False} | extra
    r = post(svc, body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_tool_choice_none_and_functions_are_accepted_and_reported(svc):
    body = {
        "model": "demo",
        "messages": [{"role": "user", "content": "How do I rotate a key?"}],
        "tools": [],
        "tool_choice": "none",
        "functions": [{"name": "f", "parameters": {}}],
        "function_call": "auto",
        "parallel_tool_calls": True,
    }
    r = post(svc, body)
    assert r.status_code == 200
    assert set(r.json()["ragsieve"]["ignored_fields"]) >= {"tools", "functions", "tool_choice"}


def test_the_passthrough_model_reaches_the_llm_as_is_with_the_real_openai_client(svc, monkeypatch):
    no_retrieval(svc, monkeypatch)
    client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
    assert PASSTHROUGH_MODEL in [m.id for m in client.models.list()]
    svc.chat.push('{"title": "Key rotation"}')
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Title this chat"}]
    reply = client.chat.completions.create(model=PASSTHROUGH_MODEL, messages=messages)
    assert reply.choices[0].message.content == '{"title": "Key rotation"}'
    assert svc.chat.history[-1]["messages"] == messages
    svc.chat.push("streamed words here")
    stream = client.chat.completions.create(model=PASSTHROUGH_MODEL, messages=messages, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed words here"
