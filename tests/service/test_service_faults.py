"""Upstream LLM faults behind the service (a fake OpenAI server on loopback): a clean error or the
documented fallback for the client, and no worker dies."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ragsieve.agent.llm.openai_chat import OpenAIChat
from tests.support.service_fakes import served
from tests.support.stub_openai import StubOpenAI, StubReply, error_body, ok

QUESTION = "How do I rotate the API key of a Lumen workspace?"


def sse_body(pieces: list[str], usage: bool = True) -> str:
    events = []
    for _i, piece in enumerate(pieces):
        events.append(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "stub-model",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
        )
    events.append(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "stub-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    if usage:
        events.append(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "stub-model",
                "choices": [],
                "usage": {"prompt_tokens": 50, "completion_tokens": len(pieces), "total_tokens": 50 + len(pieces)},
            }
        )
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def upstream_chat(stub: StubOpenAI, **kw) -> OpenAIChat:
    options = {"timeout_s": 2.0, "max_attempts": 2, "max_retry_s": 5.0, "sleep": lambda s: None, **kw}
    return OpenAIChat(stub.base_url, "up-key", "stub-model", **options)


def ask(svc, stream=False):
    c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
    return c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}], stream=stream)


def test_upstream_faults_give_clean_errors_and_the_server_stays_up(examples_index):
    replies = [
        StubReply(429, error_body("slow down"), headers={"Retry-After": "0"}),
        ok("Fine [1]."),  # retried
        StubReply(500, error_body("boom", type_="server_error")),
        StubReply(500, error_body("boom", type_="server_error")),  # both attempts fail -> 502
        StubReply(200, "{this is not json", content_type="application/json"),
        StubReply(200, "{still not json", content_type="application/json"),  # malformed twice -> 502
        StubReply(200, ok("x" * 30_000_000).body),  # a 30 MB body: refused, not held
        StubReply(200, ok("late").body, delay_s=5.0),  # hangs: not sent again (the upstream is working)
        ok("Back to normal [1]."),
    ]
    with StubOpenAI(replies) as stub:
        with served({"demo": examples_index}, upstream_chat(stub, max_reply_bytes=20_000_000)) as svc:
            assert ask(svc).choices[0].message.content.startswith("Fine [1].")
            for expected in ("HTTP 500", "not JSON", "max_reply_bytes", "timed out"):
                with pytest.raises(openai.APIStatusError) as err:
                    ask(svc)
                assert err.value.status_code == 502 and err.value.body["code"] == "upstream_error"
                assert expected in err.value.body["message"], err.value.body["message"]
            assert ask(svc).choices[0].message.content.startswith("Back to normal [1].")
            assert httpx.get(svc.base_url + "/healthz").status_code == 200


def test_real_token_streaming_from_an_openai_compatible_upstream(examples_index):
    pieces = ["Rotate", " with", " `lumen keys rotate`", " [", "3", "]", " today", "."]
    replies = [
        StubReply(200, sse_body(pieces), content_type="text/event-stream"),
        StubReply(200, ok("Plain body [1].").body),  # a server that ignores stream: true ...
        StubReply(200, ok("Plain body [1].").body),
    ]  # ... is asked again without streaming
    with StubOpenAI(replies) as stub:
        with served({"demo": examples_index}, upstream_chat(stub)) as svc:
            deltas = [ch.choices[0].delta.content for ch in ask(svc, stream=True) if ch.choices and ch.choices[0].delta.content]
            text = "".join(deltas)
            assert text.startswith("Rotate with `lumen keys rotate` [1] today.")  # [3] renumbered while streaming
            assert len(deltas) >= 6
            sent = stub.chat_requests()[0].json
            assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
            text = "".join(ch.choices[0].delta.content or "" for ch in ask(svc, stream=True) if ch.choices)
            assert text.startswith("Plain body [1].")


def test_a_stream_that_breaks_midway_ends_with_an_error_event(examples_index):
    broken = sse_body(["Rotate", " with"], usage=False).replace("data: [DONE]\n\n", "").rsplit("data:", 1)[0]
    broken += "data: {not json at all\n\n"
    with StubOpenAI([StubReply(200, broken, content_type="text/event-stream")]) as stub:
        with served({"demo": examples_index}, upstream_chat(stub)) as svc:
            with httpx.stream(
                "POST",
                svc.base_url + "/v1/chat/completions",
                timeout=60,
                json={"model": "demo", "messages": [{"role": "user", "content": QUESTION}], "stream": True},
            ) as r:
                lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
            payloads = [ln[6:] for ln in lines]
            assert payloads[-1] == "[DONE]"
            error = json.loads(payloads[-2])
            assert error["error"]["code"] == "upstream_error" and error["status"] == 502
            assert httpx.get(svc.base_url + "/healthz").status_code == 200
