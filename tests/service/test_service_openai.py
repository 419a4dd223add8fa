"""The service through the official `openai` SDK over loopback: models, chat (JSON and streamed),
conversations, system messages, errors in OpenAI's shape, keys and tenant isolation."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.support.service_fakes import ANSWER, served

QUESTION = "How do I rotate the API key of a Lumen workspace?"


def client(svc, key="not-needed"):
    return openai.OpenAI(base_url=svc.base_url + "/v1", api_key=key, max_retries=0, timeout=60)


def test_models_and_chat_json(examples_index):
    with served({"demo": examples_index}) as svc:
        c = client(svc)
        ids = [m.id for m in c.models.list()]
        assert ids == ["demo", "demo:agentic", "demo:fast", "demo:full", "ragsieve-passthrough"]
        reply = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
        content = reply.choices[0].message.content
        answer, _, refs = content.partition("\n\n**Sources**\n")
        # citations renumbered in order of use, references appended as a numbered markdown list
        assert answer == "Rotate it with `lumen keys rotate` [1]; the old key stays valid for 24 hours [2]."
        ext = reply.model_extra["ragsieve"]
        labels = [c["label"] for c in ext["citations"]]
        numbers = [line.split(" ")[0] for line in refs.splitlines()]
        assert numbers[:2] == ["[1]", "[2]"] and len(numbers) == len(labels)
        # the other top passages follow as sources, marked as not cited (agent/answer/also_retrieved.py)
        assert [c["cited"] for c in ext["citations"]] == [True, True] + [False] * (len(labels) - 2)
        assert all("not cited" in line for line in refs.splitlines()[2:])
        assert all(label in refs for label in labels)
        assert reply.usage.prompt_tokens > 0 and reply.usage.total_tokens == (
            reply.usage.prompt_tokens + reply.usage.completion_tokens
        )
        assert ext["plan"] == "fast" and [t["step"] for t in ext["trace"]] == ["retrieve", "answer"]
        assert reply.object == "chat.completion" and reply.model == "demo"


def test_stream_token_by_token_equals_the_final_answer(examples_index):
    chat = FakeChat(default=ANSWER, token_delay_s=0.005)
    with served({"demo": examples_index}, chat) as svc:
        stream = client(svc).chat.completions.create(
            model="demo", messages=[{"role": "user", "content": QUESTION}], stream=True, stream_options={"include_usage": True}
        )
        deltas, finish, usage, ext = [], None, None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                finish = choice.finish_reason or finish
                if choice.finish_reason:
                    ext = chunk.model_extra["ragsieve"]
        text = "".join(deltas)
        assert len(deltas) >= 10  # word by word, not one block
        assert text.startswith("Rotate it with `lumen keys rotate` [1]; the old key stays valid for 24 hours [2].")
        assert "**Sources**" in text and finish == "stop"
        assert usage is not None and usage.completion_tokens > 0
        assert ext["time_to_first_token_s"] >= 0 and len(ext["citations"]) >= 2  # cited, then also retrieved
        assert chat.history[-1].get("stream") is True  # the model was asked to stream


def test_two_turn_conversation_rewrites_the_follow_up(examples_index):
    def reply(messages):
        prompt = messages[-1]["content"]
        if "stand-alone question" in prompt:
            assert "and what about the old key?" in prompt and QUESTION in prompt
            return "What happens to the old API key when a Lumen workspace key is rotated?"
        return ANSWER

    chat = FakeChat(default=reply)
    with served({"demo": examples_index}, chat) as svc:
        c = client(svc)
        messages = [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "Use lumen keys rotate [1]."},
            {"role": "user", "content": "and what about the old key?"},
        ]
        out = c.chat.completions.create(model="demo", messages=messages)
        ext = out.model_extra["ragsieve"]
        assert ext["index_question"] == "What happens to the old API key when a Lumen workspace key is rotated?"
        assert ext["asked"] == "and what about the old key?"
        assert ext["trace"][0]["step"] == "rewrite" and ext["trace"][0]["outcome"] == "rewritten"
        rewrite_call, answer_call = chat.history[-2], chat.history[-1]
        # the client's system message reaches the answer call only
        assert all(m["role"] != "system" for m in rewrite_call["messages"])
        assert answer_call["messages"][0] == {"role": "system", "content": "Answer in French."}
        assert "old API key" in answer_call["messages"][-1]["content"]


def test_system_message_never_reaches_the_judge(examples_index):
    def reply(messages):
        text = messages[-1]["content"]
        if "relevant" in text.lower() and "JSON" in text:
            return json.dumps({"verdicts": []})
        return ANSWER

    chat = FakeChat(default=reply)
    with served({"demo": examples_index}, chat) as svc:
        client(svc).chat.completions.create(
            model="demo:agentic",
            messages=[{"role": "system", "content": "SYSTEM-MARKER be brief"}, {"role": "user", "content": QUESTION}],
        )
    answer_calls = [h for h in chat.history if any("SYSTEM-MARKER" in m["content"] for m in h["messages"])]
    assert len(answer_calls) >= 1 and len(chat.history) > len(answer_calls)
    for call in answer_calls:
        assert call["messages"][0]["role"] == "system" and "Question:" in call["messages"][-1]["content"]
        assert call["json_schema"] is None  # never a structured (judge/validate) call


def test_errors_in_openai_shape(examples_index):
    with served({"demo": examples_index}) as svc:
        c = client(svc)
        with pytest.raises(openai.NotFoundError) as nf:
            c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
        assert nf.value.body["code"] == "model_not_found"
        with pytest.raises(openai.BadRequestError) as br:
            c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}], n=2)
        assert br.value.body["param"] == "n"
        with pytest.raises(openai.BadRequestError, match="empty"):
            c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "   "}])
        with pytest.raises(openai.BadRequestError, match="last message"):
            c.chat.completions.create(model="demo", messages=[{"role": "assistant", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="too many messages"):
            c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "q"}] * 65)
        with pytest.raises(openai.BadRequestError, match="temperature"):
            c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "q"}], temperature=7)
        with pytest.raises(openai.NotFoundError, match="does not exist"):  # an unknown plan: no such model id
            c.chat.completions.create(model="demo:nope", messages=[{"role": "user", "content": "q"}])
        # an applied setting: max_tokens and temperature reach the answer call
        c.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}], max_tokens=33, temperature=0.5)
        assert svc.chat.history[-1]["max_tokens"] == 33 and svc.chat.history[-1]["temperature"] == 0.5
        r = httpx.post(svc.base_url + "/v1/chat/completions", json={"model": "demo", "messages": "hi"})
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_keys_and_tenant_isolation(examples_index, second_index, tmp_path):
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text('[keys]\n"key-aaaa-1234" = ["lumen"]\n"key-bbbb-1234" = ["notes"]\n')
    keys = KeyRing.load(str(keys_file), environ={"RAGSIEVE_API_KEYS": "key-admin-1234"})
    with served({"lumen": examples_index, "notes": second_index}, keys=keys) as svc:
        a, b, admin = client(svc, "key-aaaa-1234"), client(svc, "key-bbbb-1234"), client(svc, "key-admin-1234")
        assert {m.id.split(":")[0] for m in a.models.list()} == {"lumen"}  # no passthrough for a scoped key
        assert {m.id.split(":")[0] for m in b.models.list()} == {"notes"}
        assert {m.id.split(":")[0] for m in admin.models.list()} == {"lumen", "notes", "ragsieve-passthrough"}
        with pytest.raises(openai.NotFoundError):  # a scoped key never reaches the bare LLM
            a.chat.completions.create(model="ragsieve-passthrough", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.AuthenticationError):
            client(svc, "wrong-key-123").models.list()
        anonymous = httpx.get(svc.base_url + "/v1/models")
        assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "invalid_api_key"
        # A asking for B's index gets exactly the answer of a missing index
        with pytest.raises(openai.NotFoundError) as other:
            a.chat.completions.create(model="notes", messages=[{"role": "user", "content": "q"}])
        with pytest.raises(openai.NotFoundError) as missing:
            a.chat.completions.create(model="nothere", messages=[{"role": "user", "content": "q"}])
        assert other.value.body["message"].replace("notes", "X") == missing.value.body["message"].replace("nothere", "X")
        r = a.chat.completions.create(model="lumen", messages=[{"role": "user", "content": QUESTION}])
        assert all(c["source"].startswith("examples") or "lumen" in c["source"] for c in r.model_extra["ragsieve"]["citations"])
        r = b.chat.completions.create(model="notes", messages=[{"role": "user", "content": "tea ceremony?"}])
        assert all("notes" in c["source"] for c in r.model_extra["ragsieve"]["citations"])
        native = httpx.post(
            svc.base_url + "/v1/ask", json={"question": "q", "index": "notes"}, headers={"Authorization": "Bearer key-aaaa-1234"}
        )
        assert native.status_code == 404


def test_a_streamed_abstention_says_it_once_then_lists_the_closest_passages(examples_index):
    from ragsieve.agent.answer.answering import ABSTAIN, CLOSEST_INTRO

    chat = FakeChat(default=ABSTAIN, token_delay_s=0.002)
    with served({"demo": examples_index}, chat) as svc:
        stream = client(svc).chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}], stream=True)
        text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
        final = (
            client(svc)
            .chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
            .choices[0]
            .message.content
        )
    assert text.count(ABSTAIN) == 1 and text.startswith(ABSTAIN)  # streamed once, then continued
    assert CLOSEST_INTRO in text and "[1]" in text
    assert text.strip() == final.strip()  # the stream reads exactly as the non-streamed reply
