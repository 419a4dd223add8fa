"""The validation prompt reads the passages the answer cites and a few best others, not the whole context (issue 56).

The real `Validate` step, the real prompt renderer and LLM client, a recording fake model: on the code before
issue 56 the prompt held all eight context passages.
"""

from __future__ import annotations

import json

from ragsieve.agent.config import Config
from ragsieve.agent.core.state import Citation, RunState
from ragsieve.agent.core.step import Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.steps.validate import Validate
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit


def _validated_prompt(extra: int | None = None) -> str:
    context = [
        Hit(
            chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=f"passage text {i} zq{i}x", source=f"d{i}.md"),
            row=i,
            score=1.0 - i / 10,
        )
        for i in range(8)
    ]
    state = RunState(question="What does passage six say?", plan="full")
    state.context = context
    state.answer = "Passage six says zq6x [1], see also [2]."
    state.citations = [Citation(number=1, chunk_id="d6#0", source="d6.md"), Citation(number=2, chunk_id="d3#0", source="d3.md")]
    config = Config()
    if extra is not None:
        config.loop = config.loop.model_copy(update={"validate_extra": extra})
    chat = FakeChat(default=lambda messages: json.dumps({"resolved": True, "reason": "ok"}))
    result = Validate().run(state, Deps(config=config, retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer()))
    assert result.outcome == "resolved"
    return chat.history[-1]["messages"][-1]["content"]


def test_validation_reads_the_cited_passages_then_the_best_others():
    cited = _validated_prompt()  # the default: the cited passages only, in the order they are cited
    assert [i for i in range(8) if f"passage text {i} " in cited] == [3, 6]
    assert cited.index("passage text 6 ") < cited.index("passage text 3 ")
    prompt = _validated_prompt(extra=2)
    shown = [i for i in range(8) if f"passage text {i} " in prompt]
    assert shown == [0, 1, 3, 6]  # cited 6 and 3, then the context's two best others (0, 1): not 2, 4, 5, 7
    assert prompt.index("passage text 6 ") < prompt.index("passage text 3 ") < prompt.index("passage text 0 ")
    only_cited = _validated_prompt(extra=0)
    assert "passage text 6 " in only_cited and "passage text 3 " in only_cited and "passage text 0 " not in only_cited
