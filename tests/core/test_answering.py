"""Answer composition: context order, citation parsing and renumbering."""

import pytest

from ragsieve.agent.answer.answering import ABSTAIN, CUT_NOTE, answer_from_context, cited_numbers
from ragsieve.agent.config import Config
from ragsieve.agent.core.step import Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.testing import FakeChat
from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.ordering import edges_order, order_for_context
from ragsieve.tools.types import Chunk, Hit


def _hit(i: int) -> Hit:
    chunk = Chunk(
        doc_id=f"d{i}", chunk_index=0, text=f"text {i}", source=f"docs/d{i}.md", title=f"T{i}", line_start=i, line_end=i + 2
    )
    return Hit(chunk=chunk, row=i, score=1.0 / (i + 1), rank=i + 1)


def test_edges_order_puts_best_at_both_ends():
    assert edges_order([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert edges_order([1, 2]) == [1, 2]
    assert edges_order([]) == []
    assert order_for_context([1, 2, 3], "rank") == [1, 2, 3]
    with pytest.raises(UsageError, match="choose one of edges, rank"):
        order_for_context([1], "middle")


def test_cited_numbers_in_order_and_in_range():
    assert cited_numbers("a [2] b [1][2] c [9] [0]", 3) == [2, 1]


def test_answer_renumbers_citations_to_cited_passages():
    hits = [_hit(i) for i in range(4)]  # edges order: d0, d2, d3, d1
    chat = FakeChat(["Rotate it [2]. The old key lasts a day [4][2]. Ignore [7]."])
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    text, citations = answer_from_context("q?", hits, deps)
    prompt = chat.history[0]["messages"][0]["content"]
    assert prompt.index('[1] from "docs/d0.md') < prompt.index('[2] from "docs/d2.md') < prompt.index('[4] from "docs/d1.md')
    assert text == "Rotate it [1]. The old key lasts a day [2][1]. Ignore ."
    assert [c.chunk_id for c in citations] == ["d2#0", "d1#0"]
    assert citations[0].label() == "docs/d2.md:2-4"


def test_abstention_phrase_is_in_the_prompt():
    chat = FakeChat([ABSTAIN])
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    text, citations = answer_from_context("q?", [_hit(0)], deps)
    assert text == ABSTAIN and citations == []
    assert ABSTAIN in chat.history[0]["messages"][0]["content"]


def test_uncited_answer_gets_citations_inferred_by_overlap():
    hits = [_hit(0), _hit(1)]
    hits[1].chunk.text = "The old secret stays valid for a 24-hour grace period, then it is revoked."
    chat = FakeChat(["The old secret stays valid for a grace period and is then revoked."])
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    report = {}
    text, citations = answer_from_context("q?", hits, deps, report=report)
    assert [c.chunk_id for c in citations] == ["d1#0"] and [c.origin for c in citations] == ["inferred"]
    assert report["citations_inferred"] is True
    # no marker is written into the model's text: an inferred citation is never shown as one the model made
    # (issue 55, item 4; renderers list it as a suggested source instead)
    assert text == "The old secret stays valid for a grace period and is then revoked."


@pytest.mark.parametrize(
    "reply",
    [
        "The sources do not mention how to delete a workspace.",
        "I'm sorry, but the provided passages don't say what happens to the old secret.",
        "There is not enough information in the context to answer this.",
    ],
)
def test_a_refusal_in_other_words_gets_no_inferred_citations(reply):
    # hostile re-run item 11: a refusal written as text still got inferred citations
    hits = [_hit(0), _hit(1)]
    hits[1].chunk.text = reply  # even when a passage shares every word with the refusal
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(FakeChat([reply])), prompts=PromptRenderer())
    report = {}
    text, citations = answer_from_context("q?", hits, deps, report=report)
    assert citations == [] and report["citations_inferred"] is False and "[" not in text


def test_an_answer_cut_by_max_tokens_says_so_and_reports_length():
    class Cutting(FakeChat):
        def complete(self, messages, **kw):
            reply = super().complete(messages, **kw)
            words = reply.text.split()[: kw.get("max_tokens") or 10_000]
            return reply.model_copy(update={"text": " ".join(words), "finish_reason": "length"})

    deps = Deps(
        config=Config(),
        retriever=None,
        index=None,
        llm=LLM(Cutting(["Rotate the key with lumen [1] and then wait"])),
        prompts=PromptRenderer(),
    )
    report = {}
    text, _ = answer_from_context("q?", [_hit(0)], deps, report=report, max_tokens=4)
    assert report["finish_reason"] == "length" and text.endswith(CUT_NOTE)


def test_the_answer_call_sees_the_users_words_and_the_history():
    chat = FakeChat(["Scope admin [1]."])
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    history = [
        {"role": "user", "text": "What scopes can an API key have?"},
        {"role": "assistant", "text": "events:write, events:read, dashboards:read, admin."},
    ]
    answer_from_context(
        "Which API key scope lets me delete a workspace?",
        [_hit(0)],
        deps,
        asked="Which of those lets me delete a workspace?",
        history=history,
    )
    sent = chat.history[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "What scopes can an API key have?"
    assert "Which of those lets me delete a workspace?" in sent[-1]["content"]
    assert "Which API key scope lets me delete a workspace?" in sent[-1]["content"]


def test_infer_citations_threshold_and_order():
    from ragsieve.agent.answer.answering import infer_citations

    passages = ["alpha beta gamma delta", "alpha beta", "zeta eta"]
    assert infer_citations("alpha beta gamma delta", passages) == [1, 2]
    assert infer_citations("zeta theta iota kappa", passages) == []
    assert infer_citations("", passages) == []


def test_answer_step_reuses_a_draft_of_the_same_context_only():
    from ragsieve.agent.core.state import Citation, RunState
    from ragsieve.agent.steps.answer import Answer

    hits = [_hit(0), _hit(1)]
    chat = FakeChat(["fresh answer [1]"])
    config = Config.model_validate({"abstention": {"also_retrieved": 0}})  # only what the answer cites
    deps = Deps(config=config, retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    cite = Citation(number=1, chunk_id="d0#0", source="docs/d0.md")
    state = RunState(
        question="q?",
        plan="agentic",
        context=hits,
        draft="drafted [1]",
        resolved=False,
        draft_citations=[cite],
        draft_context=["d0#0", "d1#0"],
    )
    result = Answer().run(state, deps)
    assert result.summary["reused_draft"] and state.answer == "drafted [1]" and chat.history == []
    assert [c.chunk_id for c in state.citations] == ["d0#0"]
    state.draft_context = ["d0#0"]
    Answer().run(state, deps)
    assert state.answer == "fresh answer [1]" and len(chat.history) == 1


def test_streamed_numbers_are_the_final_numbers_when_same_label_passages_merge():
    from ragsieve.agent.answer.citation_stream import CitationStream

    hits = [_hit(i) for i in range(4)]
    hits[3].chunk = hits[0].chunk.model_copy(update={"chunk_index": 1})  # same file and lines as d0: one label
    chat = FakeChat(["Rotate it [4] [1]. The old key lasts a day [2]. Then [1][3]."], token_delay_s=0.0)
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    pieces: list[str] = []
    text, citations = answer_from_context("q?", hits, deps, on_token=pieces.append)
    assert "".join(pieces) == text  # the stream shows the merged numbers, repeat dropped as in the final text
    assert len({c.label() for c in citations}) == len(citations) == 3
    # prompt order (edges): d0, d2, d0's twin, d1 -- so [1][3] is one source, cited once
    assert text == "Rotate it [1] [2]. The old key lasts a day [3]. Then [2]."
    shown: list[str] = []
    stream = CitationStream(3, shown.append, ["a", "b", "a"])
    for token in ["x [", "3", "] [1", "] y [2][9][2] z"]:
        stream.feed(token)
    stream.close()
    assert "".join(shown) == "x [1] y [2] z"
    with pytest.raises(ValueError):
        CitationStream(2, shown.append, ["a"])
