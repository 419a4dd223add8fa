"""A context the model's window cannot hold: the endpoint's refusal is recognised (llama.cpp, OpenAI/vLLM wording)
and the answer is asked again with the best passages that fit, saying so, instead of failing the question.
Seen for real: the `full` plan on SciFact with the embedded 16,384-token model sent a 17,582-token request
(the budget is counted in words; the model's tokenizer counts more)."""

from __future__ import annotations

import re

import pytest

from ragsieve import Config, Orchestrator
from ragsieve.agent.answer.answering import fit_window
from ragsieve.agent.errors import ContextOverflow, LLMError
from ragsieve.agent.llm.overflow import context_overflow
from ragsieve.tools.types import Chunk, Hit
from tests.support.stub_openai import StubOpenAI, StubReply, error_body, ok

LLAMA = "request (17582 tokens) exceeds the available context size (16384 tokens), try increasing it"
OPENAI = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. "
    "Please reduce the length of the messages."
)


def test_refusals_are_told_apart():
    llama = context_overflow(400, LLAMA, "m")
    assert isinstance(llama, ContextOverflow) and (llama.requested, llama.available) == (17582, 16384)
    openai_ = context_overflow(400, OPENAI, "m")
    assert (openai_.requested, openai_.available) == (9000, 8192)
    generic = context_overflow(400, "{'code': 'context_length_exceeded'}", "m")
    assert isinstance(generic, ContextOverflow) and generic.requested is None
    assert context_overflow(400, "Invalid value for 'temperature'", "m") is None  # another bad request
    assert context_overflow(500, LLAMA, "m") is None  # a server fault is not a window refusal


def _hits(sizes):
    return [
        Hit(chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=" ".join(["word"] * n), source=f"d{i}"), row=i, score=1.0 - i / 10)
        for i, n in enumerate(sizes)
    ]


def test_fit_window_keeps_the_best_passages_that_fit():
    hits = _hits([400, 300, 200, 100])  # 1,000 estimated tokens
    exc = ContextOverflow("m", requested=2000, available=1000)  # half of it fits: x 0.9 margin = 450
    assert [h.row for h in fit_window(hits, exc)] == [0]
    assert [h.row for h in fit_window(hits, ContextOverflow("m", requested=1100, available=1000))] == [0, 1]
    unknown = fit_window(hits, ContextOverflow("m"))  # no counts given: 70 % of the estimate
    assert [h.row for h in unknown] == [0, 1]
    assert fit_window(_hits([500]), exc) == []  # a single passage is never cut to nothing: the caller gives up
    assert len(fit_window(hits, ContextOverflow("m", requested=1000, available=5000))) == 3  # always one fewer


def _passages_in(prompt: str) -> int:
    return len(re.findall(r"SOURCE \[\d+\] from", prompt))


def test_answer_retries_with_fewer_passages_over_the_real_client(examples_index):
    """The real `openai` client against a loopback server that answers like llama.cpp: the first request is
    refused for its size, the second (fewer passages) is answered; the answer says what it read."""
    refused = StubReply(
        400,
        {
            "error": {
                "code": 400,
                "message": LLAMA.replace("17582", "2000").replace("16384", "1000"),
                "type": "exceed_context_size_error",
            }
        },
    )
    with StubOpenAI([refused, ok("Rotate keys from the dashboard [1].")], max_requests=10) as stub:
        config = Config.model_validate({"llm": {"base_url": stub.base_url, "model": "stub-model"}})
        with Orchestrator.open(examples_index, config) as orch:
            answer = orch.ask("how do I rotate an API key?", plan="fast")
        prompts = [r.json["messages"][-1]["content"] for r in stub.requests if r.path.endswith("/chat/completions")]
    assert len(prompts) == 2
    first, second = _passages_in(prompts[0]), _passages_in(prompts[1])
    assert first == 5 and 1 <= second < first
    assert answer.answer.startswith("Rotate keys") and answer.citations
    assert any(f"best {second} of 5 passages" in n and "(1000 tokens)" in n for n in answer.notes), answer.notes


def test_a_refusal_that_persists_is_an_error_not_a_loop(examples_index):
    big = StubReply(400, error_body(OPENAI))
    with StubOpenAI([big] * 6, max_requests=10) as stub:
        config = Config.model_validate({"llm": {"base_url": stub.base_url, "model": "stub-model"}})
        with Orchestrator.open(examples_index, config) as orch, pytest.raises(LLMError, match="maximum context"):
            orch.ask("how do I rotate an API key?", plan="fast")
        asked = [r for r in stub.requests if r.path.endswith("/chat/completions")]
    assert 2 <= len(asked) <= 3  # the first request and at most two smaller ones (WINDOW_RETRIES)
