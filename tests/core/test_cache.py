"""DiskCache on its own and behind LLM (served from disk with no HTTP request)."""

from __future__ import annotations

import logging
import threading

import pytest
from pydantic import BaseModel

from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.cache import DiskCache
from ragsieve.agent.llm.chat import ChatReply
from ragsieve.agent.llm.client import LLM, cache_key
from ragsieve.agent.llm.openai_chat import OpenAIChat
from tests.support.stub_openai import StubOpenAI, ok

KEY = "ab12" + "0" * 60
MSGS = [{"role": "user", "content": "question"}]


class Answer(BaseModel):
    value: int


def test_round_trip_and_layout(tmp_path):
    cache = DiskCache(tmp_path)
    assert cache.get(KEY) is None
    cache.put(KEY, ChatReply(text="t", prompt_tokens=3, completion_tokens=2, latency_s=0.5, cached=True))
    assert (tmp_path / "ab" / "12" / f"{KEY}.json").is_file()
    got = cache.get(KEY)
    assert got == ChatReply(text="t", prompt_tokens=3, completion_tokens=2, latency_s=0.5, cached=False)
    assert DiskCache(tmp_path).get(KEY) == got  # persists across instances
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    "content",
    ["{not json", '{"key": "other", "reply": {"text": "x"}}', '{"key": "%s"}' % KEY, '{"key": "%s", "reply": {"text": 5}}' % KEY],
)
def test_corrupted_entry_is_a_logged_miss(tmp_path, caplog, content):
    cache = DiskCache(tmp_path)
    cache.put(KEY, ChatReply(text="t"))
    cache.path_for(KEY).write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragsieve.agent.llm.cache"):
        assert cache.get(KEY) is None
    assert "corrupted entry" in caplog.text
    cache.put(KEY, ChatReply(text="fixed"))
    assert cache.get(KEY).text == "fixed"


def test_invalid_keys_and_folder_refused(tmp_path):
    cache = DiskCache(tmp_path)
    for bad in ["../../etc/passwd", "ABCDEF0123", "abc"]:
        with pytest.raises(UsageError, match="invalid cache key"):
            cache.get(bad)
    file = tmp_path / "f"
    file.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        DiskCache(file)


def test_concurrent_writers_and_readers(tmp_path):
    cache = DiskCache(tmp_path)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(30):
                cache.put(KEY, ChatReply(text=f"{i}-{j}"))
                got = cache.get(KEY)
                assert got is not None and "-" in got.text
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not list(tmp_path.rglob("*.tmp"))


def test_second_identical_call_is_served_from_disk(tmp_path):
    with StubOpenAI([ok('{"value": 42}', prompt_tokens=9, completion_tokens=4)]) as stub:
        chat = OpenAIChat(stub.base_url, None, "m", timeout_s=5, sleep=lambda s: None)
        first = LLM(chat, cache=DiskCache(tmp_path))
        assert first.structured(MSGS, Answer).value == 42
        second = LLM(chat, cache=DiskCache(tmp_path))  # a fresh process would look the same
        assert second.structured(MSGS, Answer).value == 42
        assert len(stub.chat_requests()) == 1
        assert first.meter.snapshot().calls == 1
        usage = second.meter.snapshot()
        assert (usage.calls, usage.cached_calls, usage.prompt_tokens) == (0, 1, 0)


def test_corrupted_cache_file_means_a_new_request(tmp_path):
    with StubOpenAI([ok("first"), ok("second")]) as stub:
        chat = OpenAIChat(stub.base_url, None, "m", timeout_s=5, sleep=lambda s: None)
        cache = DiskCache(tmp_path)
        llm = LLM(chat, cache=cache)
        assert llm.text(MSGS) == "first"
        key = cache_key(
            {"model": "m", **chat.cache_identity, "templates": ""},
            MSGS,
            {"json_schema": None, "schema_name": "reply", "max_tokens": 512, "temperature": 0.0},
        )
        assert cache.path_for(key).is_file()
        cache.path_for(key).write_bytes(b"\x00\xff garbage")
        assert llm.text(MSGS) == "second"
        assert len(stub.chat_requests()) == 2
        assert cache.get(key).text == "second"
