"""OpenAIChat driven through the real openai client over HTTP against the local stub server."""

from __future__ import annotations

import email.utils
import socket
import time

import pytest

from ragsieve.agent.errors import EndpointError, LLMError, UsageError
from ragsieve.agent.llm.openai_chat import OpenAIChat, OutputMode, retry_after_s, strict_schema
from tests.support.stub_openai import StubOpenAI, StubReply, chat_body, error_body, ok

MSGS = [{"role": "user", "content": "hi"}]
SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["relevant"],
}


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(stub: StubOpenAI, sleeps: Sleeps | None = None, **kwargs) -> OpenAIChat:
    kwargs.setdefault("timeout_s", 5)
    return OpenAIChat(
        stub.base_url, "sk-test", kwargs.pop("model", "m"), sleep=sleeps if sleeps is not None else Sleeps(), **kwargs
    )


def test_429_honours_retry_after_seconds():
    sleeps = Sleeps()
    with StubOpenAI([StubReply(429, error_body("slow down"), {"Retry-After": "3"}), ok("fine")]) as stub:
        reply = make(stub, sleeps).complete(MSGS)
        assert reply.text == "fine"
        assert len(stub.chat_requests()) == 2
    assert sleeps == [3.0]


def test_429_retry_after_ms_wins_and_is_capped_by_max_retry_s():
    sleeps = Sleeps()
    replies = [
        StubReply(429, error_body("a"), {"retry-after-ms": "250", "Retry-After": "9"}),
        StubReply(429, error_body("b"), {"Retry-After": "500"}),
        ok("fine"),
    ]
    with StubOpenAI(replies) as stub:
        assert make(stub, sleeps, max_retry_s=7).complete(MSGS).text == "fine"
    assert sleeps[0] == 0.25 and 6.0 < sleeps[1] <= 7.0  # capped by what is left of max_retry_s


def test_retry_after_http_date_and_garbage():
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after_s({"retry-after": future}) <= 31
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def test_500_then_success_uses_jittered_backoff():
    sleeps = Sleeps()
    with StubOpenAI([StubReply(500, error_body("boom", type_="server_error")), ok("fine")]) as stub:
        assert make(stub, sleeps).complete(MSGS).text == "fine"
        assert len(stub.chat_requests()) == 2
    assert len(sleeps) == 1 and 0.0 <= sleeps[0] <= 0.5  # full jitter: U(0, base * 2**0)


def test_a_read_timeout_is_not_sent_again():
    # issue 44: the server accepted the request and is working on it; a second copy would queue behind it
    with StubOpenAI([StubReply(200, chat_body("late"), delay_s=3.0), ok("on time")]) as stub:
        started = time.monotonic()
        with pytest.raises(EndpointError, match="not sent again"):
            make(stub, timeout_s=0.5).complete(MSGS)
        assert time.monotonic() - started < 2.5  # did not wait for the slow reply
        assert len(stub.chat_requests()) == 1


def test_default_retry_budget_leaves_room_to_retry_a_transport_fault():
    """With the shipped ratio of llm.max_retry_s to llm.timeout_s (scaled down), a call refused by a
    transport fault is asked again."""
    from ragsieve.agent.config import IndexConfig, LLMConfig, RerankConfig

    llm, models, rerank = LLMConfig(), IndexConfig(), RerankConfig()
    ratio = llm.max_retry_s / llm.timeout_s
    assert ratio >= 2 and models.embed_max_retry_s >= 2 * models.embed_timeout_s
    assert rerank.max_retry_s >= 2 * rerank.timeout_s
    with StubOpenAI([StubReply(503, {"error": {"message": "busy"}}), ok("on time")]) as stub:
        assert make(stub, timeout_s=0.5, max_retry_s=0.5 * ratio).complete(MSGS).text == "on time"
        assert len(stub.chat_requests()) == 2


def test_exhausted_retries_raise_endpoint_error_naming_url():
    with StubOpenAI([StubReply(503, error_body("overloaded", type_="server_error"))] * 3) as stub:
        with pytest.raises(EndpointError) as info:
            make(stub, max_attempts=3).complete(MSGS)
        assert len(stub.chat_requests()) == 3
    err = info.value
    assert err.attempts == 3 and err.base_url == stub.base_url
    assert stub.base_url in str(err) and "3 attempt" in str(err) and "503" in str(err) and "model m" in str(err)


def test_total_retry_time_is_bounded():
    with StubOpenAI([StubReply(500, error_body("down"))] * 50, max_requests=50) as stub:
        chat = OpenAIChat(stub.base_url, None, "m", max_attempts=20, max_retry_s=0.4, timeout_s=2)
        started = time.monotonic()
        with pytest.raises(EndpointError):
            chat.complete(MSGS)
        assert time.monotonic() - started < 3.0
        assert len(stub.chat_requests()) < 20


def test_connection_refused_raises_endpoint_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    sleeps = Sleeps()
    with pytest.raises(EndpointError) as info:
        OpenAIChat(url, None, "m", max_attempts=2, sleep=sleeps, timeout_s=2).complete(MSGS)
    assert url in str(info.value) and info.value.attempts == 2 and len(sleeps) == 1


def test_non_retryable_400_is_llm_error_without_retry():
    sleeps = Sleeps()
    with StubOpenAI([StubReply(400, error_body("context length exceeded")), ok("never")]) as stub:
        with pytest.raises(LLMError) as info:
            make(stub, sleeps).complete(MSGS)
        assert len(stub.chat_requests()) == 1
    assert not isinstance(info.value, EndpointError)
    assert "400" in str(info.value) and "context length exceeded" in str(info.value)
    assert sleeps == []


def test_401_is_llm_error_without_retry():
    with StubOpenAI([StubReply(401, error_body("bad key"))]) as stub:
        with pytest.raises(LLMError, match="401.*bad key"):
            make(stub).complete(MSGS)
        assert len(stub.chat_requests()) == 1


def test_json_schema_request_is_strict():
    with StubOpenAI([ok('{"relevant": true, "reason": "x"}')]) as stub:
        chat = make(stub, output_mode="json_schema")
        chat.complete(MSGS, json_schema=SCHEMA, schema_name="Judge verdict", max_tokens=33, temperature=0.0)
        body = stub.chat_requests()[0].json
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "Judge_verdict"
    assert fmt["json_schema"]["schema"]["required"] == ["relevant", "reason"]
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert body["max_tokens"] == 33 and body["temperature"] == 0.0 and body["model"] == "m"
    assert body["messages"] == MSGS
    assert SCHEMA["required"] == ["relevant"]  # caller's schema untouched


def test_strict_schema_closes_nested_objects():
    nested = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/It"}}},
        "$defs": {"It": {"type": "object", "properties": {"id": {"type": "integer", "default": 0}}}},
    }
    out = strict_schema(nested)
    item = out["$defs"]["It"]
    assert item["additionalProperties"] is False and item["required"] == ["id"]
    assert "default" not in item["properties"]["id"]


def test_strict_schema_keeps_property_named_default_and_maps():
    schema = {
        "type": "object",
        "properties": {"default": {"type": "string"}, "counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
    }
    out = strict_schema(schema)
    assert out["required"] == ["default", "counts"] and "default" in out["properties"]
    assert out["properties"]["counts"]["additionalProperties"] == {"type": "integer"}


def test_auto_downgrades_to_json_object_and_remembers():
    rejection = StubReply(400, error_body("'response_format.type' must be 'json_object' or 'text'", param="response_format"))
    with StubOpenAI([rejection, ok('{"relevant": true}'), ok('{"relevant": false}')]) as stub:
        chat = make(stub)
        assert chat.complete(MSGS, json_schema=SCHEMA).text == '{"relevant": true}'
        assert chat.current_mode is OutputMode.JSON_OBJECT
        chat.complete(MSGS, json_schema=SCHEMA)
        reqs = stub.chat_requests()
    assert [r.json["response_format"]["type"] for r in reqs] == ["json_schema", "json_object", "json_object"]
    assert "JSON schema" in reqs[1].json["messages"][0]["content"]  # schema described in the prompt


def test_auto_downgrades_twice_to_text():
    with StubOpenAI(
        [
            StubReply(400, error_body("json_schema not supported")),
            StubReply(400, error_body("response_format not supported")),
            ok('{"relevant": true}'),
        ]
    ) as stub:
        chat = make(stub)
        chat.complete([{"role": "system", "content": "Judge."}] + MSGS, json_schema=SCHEMA)
        last = stub.chat_requests()[-1].json
    assert chat.current_mode is OutputMode.TEXT
    assert "response_format" not in last
    assert last["messages"][0]["content"].startswith("Judge.") and '"relevant"' in last["messages"][0]["content"]


def test_fixed_json_schema_mode_does_not_downgrade():
    with StubOpenAI([StubReply(400, error_body("json_schema not supported"))]) as stub:
        with pytest.raises(LLMError, match="json_schema not supported"):
            make(stub, output_mode="json_schema").complete(MSGS, json_schema=SCHEMA)
        assert len(stub.chat_requests()) == 1


def test_usage_and_latency_reported():
    with StubOpenAI([ok("a", prompt_tokens=11, completion_tokens=4), StubReply(200, chat_body("b", usage=False))]) as stub:
        chat = make(stub)
        first, second = chat.complete(MSGS), chat.complete(MSGS)
    assert (first.prompt_tokens, first.completion_tokens) == (11, 4) and first.latency_s > 0
    assert (second.prompt_tokens, second.completion_tokens) == (0, 0)


def test_model_none_uses_first_listed_model():
    with StubOpenAI([ok("x")], models=["served-model", "other"]) as stub:
        chat = make(stub, model=None)
        assert chat.model_name == "served-model"
        chat.complete(MSGS)
        assert stub.chat_requests()[0].json["model"] == "served-model"


def test_model_none_with_empty_list_fails():
    with StubOpenAI([], models=[]) as stub:
        with pytest.raises(LLMError, match="lists no models"):
            make(stub, model=None).complete(MSGS)


def test_empty_choices_and_refusal_are_llm_errors():
    empty = chat_body("x")
    empty["choices"] = []
    with StubOpenAI(
        [
            StubReply(200, empty),
            StubReply(200, chat_body(None, refusal="I can't help with that")),
            StubReply(200, chat_body(None)),
        ]
    ) as stub:
        chat = make(stub)
        with pytest.raises(LLMError, match="no choices"):
            chat.complete(MSGS)
        with pytest.raises(LLMError, match="refused: I can't help with that"):
            chat.complete(MSGS)
        with pytest.raises(LLMError, match="no message content"):
            chat.complete(MSGS)


@pytest.mark.parametrize(
    "kwargs, word",
    [({"output_mode": "yaml"}, "output_mode"), ({"max_attempts": 0}, "max_attempts"), ({"timeout_s": 0}, "timeout_s")],
)
def test_bad_settings_are_refused(kwargs, word):
    with pytest.raises(UsageError, match=word):
        OpenAIChat("http://127.0.0.1:9/v1", None, "m", **kwargs)
    with pytest.raises(UsageError, match="base_url"):
        OpenAIChat("localhost:8080", None, "m")


def test_loopback_endpoint_ignores_proxy_environment(monkeypatch):
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    with StubOpenAI([ok("direct")]) as stub:
        assert make(stub, max_attempts=1).complete(MSGS).text == "direct"
