"""LLM.structured over the real openai client against the stub: re-ask on bad JSON, usage metering."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from ragsieve.agent.errors import StructuredOutputError
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.openai_chat import OpenAIChat
from tests.support.stub_openai import StubOpenAI, ok


class Verdict(BaseModel):
    relevant: bool
    reason: str


MSGS = [{"role": "system", "content": "You judge relevance."}, {"role": "user", "content": "Is chunk 3 relevant?"}]


def llm_for(stub: StubOpenAI, mode: str = "json_schema") -> LLM:
    chat = OpenAIChat(stub.base_url, None, "m", timeout_s=5, output_mode=mode, sleep=lambda s: None)
    return LLM(chat, max_tokens=64)


def test_malformed_json_is_reasked_once_with_the_error():
    with StubOpenAI(
        [
            ok('{"relevant": tru', prompt_tokens=20, completion_tokens=5),
            ok('{"relevant": true, "reason": "mentions keys"}', prompt_tokens=40, completion_tokens=9),
        ]
    ) as stub:
        llm = llm_for(stub)
        verdict = llm.structured(MSGS, Verdict)
        reqs = stub.chat_requests()
    assert verdict == Verdict(relevant=True, reason="mentions keys")
    assert len(reqs) == 2
    second = reqs[1].json["messages"]
    assert second[:2] == MSGS
    assert second[2] == {"role": "assistant", "content": '{"relevant": tru'}
    assert "That reply was not valid" in second[3]["content"] and "no JSON value found" in second[3]["content"]
    assert reqs[1].json["response_format"]["type"] == "json_schema"
    usage = llm.meter.snapshot()
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (2, 60, 14)


def test_missing_key_is_reasked_naming_the_field():
    with StubOpenAI([ok('{"relevant": false}'), ok('{"relevant": false, "reason": "off topic"}')]) as stub:
        verdict = llm_for(stub).structured(MSGS, Verdict)
        retry_note = stub.chat_requests()[1].json["messages"][-1]["content"]
    assert verdict.reason == "off topic"
    assert "reason: Field required" in retry_note


def test_malformed_twice_raises_keeping_raw():
    with StubOpenAI([ok("not json at all"), ok('{"relevant": "perhaps"}')]) as stub:
        llm = llm_for(stub)
        with pytest.raises(StructuredOutputError) as info:
            llm.structured(MSGS, Verdict)
        assert len(stub.chat_requests()) == 2
    assert info.value.raw == '{"relevant": "perhaps"}'
    assert "relevant" in info.value.errors
    assert llm.meter.snapshot().calls == 2


def test_text_mode_describes_schema_and_parses_fenced_reply():
    with StubOpenAI([ok('Sure!\n```json\n{"relevant": true, "reason": "r"}\n```')]) as stub:
        verdict = llm_for(stub, mode="text").structured(MSGS, Verdict)
        body = stub.chat_requests()[0].json
    assert verdict.relevant is True
    assert "response_format" not in body
    system = body["messages"][0]["content"]
    assert system.startswith("You judge relevance.")
    described = json.loads(system.split("JSON schema:\n", 1)[1])
    assert described == Verdict.model_json_schema()


def test_plain_text_call_sends_no_response_format():
    with StubOpenAI([ok("hello there", prompt_tokens=3, completion_tokens=2)]) as stub:
        llm = llm_for(stub)
        assert llm.text(MSGS, max_tokens=10) == "hello there"
        body = stub.chat_requests()[0].json
    assert "response_format" not in body and body["max_tokens"] == 10 and body["temperature"] == 0.0
    assert llm.meter.snapshot().completion_tokens == 2
