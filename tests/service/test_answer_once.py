"""A streamed answer is sent once and reads exactly as the non-streamed one: the `openai` SDK over loopback,
a crawled page whose `#lru` section spans several chunks, and a scripted model citing two of them (which merge
into one citation), apart and adjacent, with trailing whitespace."""

from __future__ import annotations

import openai
import pytest

from ragsieve.agent.answer.answering import ABSTAIN
from ragsieve.agent.answer.citation_stream import CitationStream
from ragsieve.testing import FakeChat
from tests.support.anchor_fixtures import QUESTION, build_site_index, citing_twice, every_chunk_config, write_site
from tests.support.service_fakes import served
from tests.support.web_fixtures import static_site


@pytest.fixture(scope="module")
def site_index(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("anchor-site")
    with static_site(write_site(root / "site")) as port:
        yield build_site_index(root / "index", port, embedder), port


def ask(c: openai.OpenAI, stream: bool) -> tuple[str, list]:
    messages = [{"role": "user", "content": QUESTION}]
    if not stream:
        message = c.chat.completions.create(model="py", messages=messages).choices[0].message
        return message.content or "", list(message.annotations or [])
    parts, annotations = [], []
    for chunk in c.chat.completions.create(model="py", messages=messages, stream=True):
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            annotations.extend((choice.delta.model_extra or {}).get("annotations") or [])
    return "".join(parts), annotations


def test_two_chunks_under_one_anchor_stream_once_and_match_the_json_answer(site_index):
    index, _port = site_index
    chat = FakeChat(default=citing_twice, token_delay_s=0.001)
    with served({"py": index}, chat, config=every_chunk_config()) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
        whole, whole_notes = ask(c, stream=False)
        streamed, streamed_notes = ask(c, stream=True)
    assert streamed == whole  # byte for byte
    answer = whole.partition("\n\n**Sources**")[0]
    assert answer == (
        "The decorator keeps up to maxsize results [1] and evicts the least recently used entry when it is full [1]."
    )
    assert whole.count("least recently used") == 1 and whole.count("**Sources**") == 1
    assert len(whole_notes) == len(streamed_notes) == 1  # two chunks, one anchor: one source
    prompts = [h for h in chat.history if "SOURCE [" in h["messages"][-1]["content"]]
    assert len(prompts) == 2  # one answer call per request, nothing re-asked


def test_the_stream_holds_what_may_still_change():
    shown: list[str] = []
    stream = CitationStream(3, shown.append, ["a", "b", "a"])
    for token in ["  x [", "3", "] [1", "] y [2][9][2] z", "  \n"]:
        stream.feed(token)
    assert "".join(shown) == "x [1] y [2] z"  # the trailing whitespace waits: it may be the end
    stream.close()
    assert "".join(shown) == stream.text == stream.released == "x [1] y [2] z" and stream.cited == [3, 1, 2]
    held: list[str] = []
    abstain = CitationStream(2, held.append)
    for word in ABSTAIN.split(" "):
        abstain.feed(word + " ")
    abstain.close()
    assert held == [] and abstain.text == ABSTAIN  # the answer step decides what replaces an abstention
    strict: list[str] = []
    uncited = CitationStream(2, strict.append, hold_uncited=True)
    uncited.feed("It is so. ")
    assert strict == []
    uncited.feed("See [2].")
    uncited.close()
    assert "".join(strict) == "It is so. See [1]."
    with pytest.raises(ValueError):
        CitationStream(2, shown.append, ["a"])


def test_a_validated_plan_streams_only_the_answer_that_stands(examples_index):
    """agentic: answer, validate (unresolved), fallback. The fallback adds nothing over examples/ here, so the run
    ends with the answer it has (issue 56): the stream carries that answer once and equals the JSON reply."""
    import json

    from tests.support.service_fakes import served
    from tests.support.web_fixtures import scripted_reply

    def reply(messages):
        prompt = messages[-1]["content"]
        if "Draft answer:" in prompt:  # every validation refuses
            reply.validations += 1
            return json.dumps({"resolved": False, "reason": "scripted"})
        if "SOURCE [" in prompt:
            reply.answers += 1
            return "The one answer, checked [1]."
        return scripted_reply(messages)

    reply.validations = reply.answers = 0
    with served({"demo": examples_index}, FakeChat(default=reply, token_delay_s=0.001)) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        messages = [{"role": "user", "content": "How do I rotate the API key?"}]
        whole = c.chat.completions.create(model="demo:agentic", messages=messages).choices[0].message.content
        streamed = "".join(
            ch.choices[0].delta.content or ""
            for ch in c.chat.completions.create(model="demo:agentic", messages=messages, stream=True)
            if ch.choices
        )
    assert reply.answers == 2 and reply.validations == 2
    assert streamed == whole and whole.startswith("The one answer, checked [1].") and streamed.count("The one answer") == 1
