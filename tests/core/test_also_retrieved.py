"""The reply's sources hold the retrieved top passages whatever the model cites (agent/answer/also_retrieved.py)."""

from ragsieve.agent.answer.also_retrieved import with_also_retrieved
from ragsieve.agent.config import Config
from ragsieve.agent.core.state import Citation, RunState
from ragsieve.agent.core.step import Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.steps.answer import Answer
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit


def _hit(i: int, source: str | None = None, symbol: str = "") -> Hit:
    chunk = Chunk(
        doc_id=f"d{i}",
        chunk_index=0,
        text=f"passage {i} about keys",
        source=source or f"docs/d{i}.md",
        line_start=None,
        line_end=None,
        symbol=symbol,
    )
    return Hit(chunk=chunk, row=i, score=1.0 / (i + 1), rank=i + 1)


def test_uncited_top_passages_follow_the_cited_ones_marked_as_not_cited():
    hits = [_hit(i) for i in range(6)]
    cited = [Citation(number=1, chunk_id="d2#0", source="docs/d2.md")]
    text, citations = with_also_retrieved("Rotate keys [1].", cited, hits, 4)
    assert [c.chunk_id for c in citations] == ["d2#0", "d0#0", "d1#0", "d3#0"]
    assert [c.number for c in citations] == [1, 2, 3, 4]
    assert [c.cited for c in citations] == [True, False, False, False]
    assert text == "Rotate keys [1]."  # the answer text is the model's: sources only, never claims
    assert with_also_retrieved("Rotate keys [1].", cited, hits, 0) == ("Rotate keys [1].", cited)


def test_a_passage_with_a_listed_label_or_merged_id_is_not_listed_twice():
    hits = [_hit(0, "site/re.html", "#re.search"), _hit(1, "site/re.html", "#re.search"), _hit(2)]
    cited = [Citation(number=1, chunk_id="x#0", source="site/re.html", symbol="#re.search", merged=["d2#0"])]
    text, citations = with_also_retrieved("Use re.search [1].", cited, hits, 5)
    assert citations == cited and text == "Use re.search [1]."


def test_the_answer_step_lists_the_top_passages_after_a_model_that_cites_one_and_after_an_abstention():
    hits = [_hit(i) for i in range(5)]
    chat = FakeChat(["Keys rotate daily [3].", "The context does not contain the answer."])
    deps = Deps(config=Config(), retriever=None, index=None, llm=LLM(chat), prompts=PromptRenderer())
    state = RunState(question="How do keys rotate?", plan="fast", context=hits)
    Answer().run(state, deps)
    assert state.abstention is None and len(state.citations) == 5
    assert {c.chunk_id for c in state.citations} == {f"d{i}#0" for i in range(5)}
    assert state.answer == "Keys rotate daily [1]." and [c.cited for c in state.citations] == [True] + [False] * 4
    state = RunState(question="How do keys rotate?", plan="fast", context=hits)
    Answer().run(state, deps)  # abstains: 3 closest passages quoted, the other 2 of the top 5 listed
    assert state.abstention == "model" and [c.chunk_id for c in state.citations] == [f"d{i}#0" for i in range(5)]
    # the quoted passages are not citations of an abstention: no surface shows them as cited (issue 44, item 11)
    assert [c.cited for c in state.citations] == [False] * 5 and "[3]" in state.answer and "[4]" not in state.answer


def test_a_budget_stop_before_any_answer_lists_the_closest_passages_marked_as_not_an_answer():
    from ragsieve.agent.answer.also_retrieved import STOPPED
    from ragsieve.agent.answer.answering import CLOSEST_INTRO
    from ragsieve.agent.llm.budget import QuestionBudget
    from tests.support.loop_fakes import CHAIN, Script, make_deps, run

    script = Script(answer="Alpha rotates daily [1].", validate=False)
    deps = make_deps(CHAIN, FakeChat(default=script))
    deps.llm = LLM(deps.llm.chat, budget=QuestionBudget(max_calls=1))  # spent by the first judge call
    state = run(deps, "Where was the alpha project leader born?")
    assert "best answer so far: closest passages" in state.stopped and len(script.kinds) == 1
    assert state.answer.startswith(STOPPED) and CLOSEST_INTRO in state.answer
    assert state.citations and all(f"[{c.number}]" in state.answer for c in state.citations if c.cited)
