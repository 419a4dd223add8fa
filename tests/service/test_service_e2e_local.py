"""The service end to end with the embedded llama.cpp model: the answer streams token by token."""

from __future__ import annotations

import openai
import pytest

from ragsieve.agent.answer.answering import ABSTAIN
from tests.support.service_fakes import served

pytestmark = pytest.mark.llm


def test_embedded_model_streams_through_the_chat_api(examples_index, local_llm):
    with served({"demo": examples_index}, local_llm.chat, llm_parallel=2) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=900)
        stream = c.chat.completions.create(
            model="demo",
            max_tokens=48,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "How do I rotate the API key of a Lumen workspace?"}],
        )
        deltas, usage, ext = [], None, None
        for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                if choice.finish_reason:
                    ext = chunk.model_extra["ragsieve"]
        text = "".join(deltas)
        assert text.strip()
        if text.startswith(ABSTAIN):  # a reply that may be the abstention is held until decided (CitationStream):
            assert "Closest passages" in text  # the small model declined, and the passages follow it, in one piece
        else:
            assert len(deltas) >= 5  # many deltas: the model's own tokens
        assert usage.completion_tokens > 0 and usage.prompt_tokens > 100
        assert ext["time_to_first_token_s"] > 0 and ext["trace"][-1]["step"] == "answer"
