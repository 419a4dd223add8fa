"""The agentic loop driven by a scripted FakeChat: convergence, budget, neighbours, fallback."""

from __future__ import annotations

import ragsieve.agent.steps.expand  # noqa: F401
import ragsieve.agent.steps.fallback  # noqa: F401
import ragsieve.agent.steps.judge  # noqa: F401
import ragsieve.agent.steps.validate  # noqa: F401
from ragsieve.agent.core.summaries import GrewSummary
from ragsieve.testing import FakeChat
from tests.support.loop_fakes import CHAIN, Script, chain_judge, make_deps, run, steps


def test_converges_when_relevant_set_stops_growing():
    script = Script(judge=chain_judge)
    deps = make_deps(CHAIN, FakeChat(default=script), candidates=1, expand_k=1, max_iterations=10, final_k=3, neighbours=False)
    state = run(deps, "Where was the alpha project leader born?")
    assert steps(state) == [
        ("retrieve", "next"),
        ("judge", "next"),
        ("expand", "grew"),
        ("judge", "next"),
        ("expand", "grew"),
        ("judge", "next"),
        ("expand", "grew"),
        ("judge", "next"),
        ("expand", "converged"),
        ("answer", "next"),
        ("validate", "resolved"),
    ]
    assert state.loop.stop_reason == "relevant set did not grow in the last judge round"
    assert state.relevant == ["a#0", "b#0", "c#0"]
    assert [r.new_relevant for r in state.loop.rounds] == [["a#0"], ["b#0"], ["c#0"], []]
    # an unmeasured judge (auto: union): the relevant set, of whatever size, with the fast context (here inside it)
    assert [h.chunk_id for h in state.context] == ["a#0", "b#0", "c#0"]
    assert state.loop.selection["source"] == "relevant set + fast context"
    # never re-judged: every judged text appears once
    assert len(script.judged_texts) == len(set(script.judged_texts))
    # the expansion query carried the relevant chunk texts
    assert deps.retriever.calls[1]["extra_texts"] == [CHAIN["a"][0]]
    assert state.trace[2].summary.new_candidates
    # the final answer is the validated one: one answer call, then one validation
    assert script.kinds[-2:] == ["answer", "validate"] and script.kinds.count("answer") == 1


def test_budget_stop_bounds_the_loop():
    script = Script(judge=lambda q, t: True)  # says yes to everything: would grow forever
    docs = {f"d{i}": [f"alpha word{i} and alpha more{i}"] for i in range(30)}
    deps = make_deps(
        docs,
        FakeChat(default=script),
        candidates=2,
        expand_k=2,
        max_iterations=20,
        max_llm_calls=3,
        uninformative_min_n=10,
        neighbours=False,
    )
    state = run(deps, "alpha?")
    assert "LLM-call budget reached" in state.loop.stop_reason
    assert script.kinds.count("judge") == 3
    assert [s for s, _ in steps(state)].count("judge") == 3


def test_max_iterations_stop():
    script = Script(judge=lambda q, t: True)
    docs = {f"d{i}": [f"alpha word{i}"] for i in range(30)}
    deps = make_deps(
        docs, FakeChat(default=script), candidates=2, expand_k=2, max_iterations=2, uninformative_min_n=10, neighbours=False
    )
    state = run(deps, "alpha?")
    assert state.loop.stop_reason == "max_iterations=2 reached"
    assert script.kinds.count("judge") == 2


SPLIT = {
    "lumen/keys.py": [
        'def rotate_api_key(workspace):\n    """Rotate the API key of a Lumen workspace."""\n    issue_key(workspace)',
        "    previous.expire_after(hours=24)  # grace period",
        "def list_keys(ws):\n    return ws.keys",
    ],
    "docs/other.md": ["The workspace settings page lists members and billing."],
}


def test_neighbour_expansion_recovers_a_function_split_across_chunks():
    # the second half of the function shares no word with the question: retrieval alone misses it
    script = Script(
        judge=lambda q, t: "rotate_api_key" in t or "previous.expire_after" in t, answer="The old key expires after 24 hours [1]."
    )
    # a judge measured to be trusted (`relevant`): the context is its relevant set (under `union` the fast
    # context's other.md#0 would stay beside it)
    deps = make_deps(SPLIT, FakeChat(default=script), candidates=2, expand_k=2, final_k=2, combine="relevant")
    question = "How do I rotate the API key of a Lumen workspace?"
    first = deps.retriever.run(question, top_k=10)
    assert "lumen/keys.py#1" not in [h.chunk_id for h in first]
    state = run(deps, question)
    grew = [e for e in state.trace if e.step == "expand" and e.outcome == "grew"][0]
    assert isinstance(grew.summary, GrewSummary) and "lumen/keys.py#1" in grew.summary.neighbours
    assert state.relevant == ["lumen/keys.py#0", "lumen/keys.py#1"]
    assert [h.chunk_id for h in state.context] == ["lumen/keys.py#0", "lumen/keys.py#1"]
    assert state.loop.selection["relevant_set"] == ["lumen/keys.py#0", "lumen/keys.py#1"]


FALLBACK_DOCS = {
    "main": ["the alpha code overview", "the alpha code details"],
    "noise": ["alpha noise"],
    "rare": ["zeta appendix: alpha secret value 42"],
}
FALLBACK_Q = "What is the alpha code?"


def fallback_deps(script, tmp_path):
    from ragsieve.tools.filters.rerank import Reranker

    deps = make_deps(FALLBACK_DOCS, FakeChat(default=script), sparse_rows=[2, 3], candidates=2, final_k=2, max_iterations=1)
    deps.caches.reranker = Reranker(cache_dir=tmp_path)  # offline: embedding order, said so
    return deps


def test_failed_validation_takes_the_sparse_fallback_then_answers(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t or "secret" in t, validate=[False, True], answer="The value is 42 [1].")
    deps = fallback_deps(script, tmp_path)
    # a judge measured to be trusted: the context is its relevant set (under `union` the fast context stays too)
    deps.config.loop = deps.config.loop.model_copy(update={"combine": "relevant"})
    state = run(deps, FALLBACK_Q)
    assert steps(state) == [
        ("retrieve", "next"),
        ("judge", "next"),
        ("expand", "converged"),
        ("answer", "next"),
        ("validate", "unresolved"),
        ("fallback", "next"),
        ("answer", "next"),
        ("validate", "resolved"),
    ]
    assert state.loop.stop_reason == "max_iterations=1 reached"
    fb = next(e for e in state.trace if e.step == "fallback").summary
    assert deps.retriever.calls[-1]["rows"] == [2, 3]
    assert fb["rerank"] == "embedding" and "unavailable" in fb["rerank_note"]
    assert fb["candidates"] == ["noise#0", "rare#0"]  # dense_score order: 1/2 > 1/6
    assert fb["added"] == ["rare#0"] and fb["judge_mode"] == "judge"
    assert [h.chunk_id for h in state.context] == ["main#0", "rare#0"]  # the relevant set + the fallback's
    assert state.fallback_used and state.resolved is True
    assert state.answer == "The value is 42 [1]."
    assert script.kinds == ["judge", "answer", "validate", "judge", "answer", "validate"]


def test_second_failed_validation_is_exhausted_and_still_answers(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t or "secret" in t, validate=[False, False], answer="Not sure [1].")
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    tail = steps(state)[-4:]
    assert tail == [("validate", "unresolved"), ("fallback", "next"), ("answer", "next"), ("validate", "exhausted")]
    assert state.answer == "Not sure [1]."
    assert script.kinds.count("validate") == 2


def test_a_fallback_that_adds_nothing_ends_the_run_with_the_answer_it_has(tmp_path):
    """Issue 56: the same context would give the same answer and validation again: no second answer call."""
    script = Script(judge=lambda q, t: "overview" in t, validate=[False, False], answer="Not sure [1].")
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    assert steps(state)[-2:] == [("validate", "unresolved"), ("fallback", "unchanged")]
    assert state.fallback is not None and state.fallback.added == [] and state.fallback.candidates
    assert state.answer == "Not sure [1]." and state.resolved is False
    assert script.kinds.count("answer") == 1 and script.kinds.count("validate") == 1


def test_validator_malformed_json_defaults_to_unresolved(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t, validate=["no json", "still none", True])
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    first = next(e for e in state.trace if e.step == "validate")
    assert first.outcome == "unresolved" and first.summary["default"] == "unresolved"
    assert "StructuredOutputError" in first.summary["reason"]
    assert first.usage.calls == 2  # the ask and the one re-ask
    assert ("fallback", "unchanged") in steps(state)  # the judge accepts no sparse chunk: the run ends there


def test_fallback_on_an_index_with_vectors_ranks_sparse_chunks_by_our_distance_score(tmp_path):
    """The vector path (not the test double's retriever): a planted sparse chunk whose information is found
    nowhere else outranks a sparse near-duplicate that is closer to the question by cosine alone."""
    from ragsieve.agent.core.state import RunState
    from ragsieve.agent.plan.plans import STEPS
    from ragsieve.tools.filters.rerank import Reranker
    from ragsieve.tools.index.sparse.subset import cosmix_scores
    from tests.support.loop_fakes import FakeRetriever, VecIndex

    docs = {
        "dup1": ["alpha code secret details here"],
        "dup2": ["alpha code secret details now"],
        "rare": ["alpha code zeta"],
        "main": ["beta system overview"],
    }
    deps = make_deps(docs, FakeChat(default=Script(judge=lambda q, t: "zeta" in t or "now" in t)), sparse_rows=[1, 2])
    deps.index = VecIndex(docs, sparse_rows=[1, 2])
    deps.retriever = FakeRetriever(deps.index)
    deps.config.fallback = deps.config.fallback.model_copy(update={"max_added": 1})

    class ScoreOrder(Reranker):  # a reranker that keeps the candidates' order (what FlashRank would refine)
        def run(self, query, hits):
            return super().run(query, hits).model_copy(update={"hits": hits})

    deps.caches.reranker = ScoreOrder(cache_dir=tmp_path)
    question = "alpha code secret"
    state = RunState(question=question, plan="t")
    main = [h for h in deps.retriever.run(question, top_k=10) if h.chunk_id == "dup1#0"]
    state.remember(main)
    state.context = main
    summary = STEPS["fallback"]().run(state, deps).summary
    q = deps.index.embed_query(question)
    cos = deps.index.vectors[[1, 2]] @ q
    assert cos[0] > cos[1]  # by cosine alone the near-duplicate (row 1) comes first ...
    nn = [max(float(deps.index.vectors[r] @ deps.index.vectors[o]) for o in range(4) if o != r) for r in (1, 2)]
    assert list(cosmix_scores(cos, nn, 0.5)).index(max(cosmix_scores(cos, nn, 0.5))) == 1  # ... ours: the rare one
    assert summary["scoring"].startswith("cos(q,c) + 0.5")  # our score ran, not the retriever on S
    assert summary["candidates"] == ["rare#0", "dup2#0"] and summary["added"] == ["rare#0"]
    assert [h.chunk_id for h in state.context] == ["dup1#0", "rare#0"]
