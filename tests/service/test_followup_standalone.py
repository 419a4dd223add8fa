"""A follow-up whose rewrite comes back unusable is searched as the user wrote it when it stands alone; the
previous question is added only when the follow-up refers back to it (issue 55, item 9). The same rule on every
surface that takes a conversation: the OpenAI API (real `openai` client), `/v1/ask` and the chat page's API.
MCP's `ask` takes no history, so it has no follow-ups to rewrite."""

from __future__ import annotations

import httpx
import openai
import pytest

from ragsieve.agent.answer.conversation import depends_on_history
from ragsieve.testing import FakeChat
from tests.support.service_fakes import ANSWER, served, sse_events

FIRST = "How do I rotate the API key of a Lumen workspace?"
STANDALONE = "What is the default request timeout of the Python client?"
DEPENDENT = "and does it keep working afterwards?"


def rewrite_drops_the_words(messages):
    """The scripted model: its rewrite repeats the previous question (it drops the follow-up's own words, so the
    rewrite is unusable); every other call is answered."""
    if "stand-alone question" in messages[-1]["content"]:
        return FIRST
    return ANSWER


@pytest.mark.parametrize("follow_up, glued", [(STANDALONE, False), (DEPENDENT, True)])
def test_the_same_rule_on_the_openai_api_ask_and_chat_page(examples_index, follow_up, glued):
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "Run lumen keys rotate [1]."}]
    with served({"demo": examples_index}, FakeChat(default=rewrite_drops_the_words)) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="unused", max_retries=0)
        out = client.chat.completions.create(model="demo", messages=history + [{"role": "user", "content": follow_up}])
        ext = out.model_extra["ragsieve"]
        ask = httpx.post(svc.base_url + "/v1/ask", json={"question": follow_up, "history": history}, timeout=60)
        assert ask.status_code == 200, ask.text
        with httpx.stream(
            "POST", svc.base_url + "/ui/api/ask", json={"question": follow_up, "history": history}, timeout=60
        ) as resp:
            done = next(data for kind, data in sse_events(resp) if kind == "done")
        assert ext["trace"][0]["step"] == ask.json()["trace"][0]["step"] == done["trace"][0]["step"] == "rewrite"
        queries = {ext["index_question"], ask.json()["question"], done["question"]}
        assert len(queries) == 1, queries  # identical on the three surfaces
        query = queries.pop()
        if glued:
            assert query.startswith(follow_up) and FIRST in query  # "it" needs the previous question
        else:
            assert query == follow_up and "(context:" not in query  # stands alone: searched alone
            assert done["trace"][0]["summary"]["asked"] == follow_up  # the question logged is the user's own
        answer_prompt = svc.chat.history[-1]["messages"][-1]["content"]
        assert (FIRST in answer_prompt.rsplit("Question:", 1)[-1]) is glued


def test_what_counts_as_depending_on_the_conversation():
    assert not depends_on_history("How do I run several coroutines concurrently with asyncio?")
    assert not depends_on_history(STANDALONE)
    for dependent in (
        DEPENDENT,
        "and for Windows?",
        "What about the old key?",
        "Does it work on Windows?",
        "why?",
        "Can those be nested?",
    ):
        assert depends_on_history(dependent), dependent
