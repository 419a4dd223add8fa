"""The agentic loop driven by a scripted FakeChat: convergence, budget, neighbours, fallback, failures."""
from __future__ import annotations

import json
import re
import threading

import pytest

import agent.steps.draft  # noqa: F401  (registers the loop's steps)
import agent.steps.expand  # noqa: F401
import agent.steps.fallback  # noqa: F401
import agent.steps.judge  # noqa: F401
import agent.steps.validate  # noqa: F401
from agent.config import Config
from agent.errors import EndpointError
from agent.fake_chat import FakeChat
from agent.llm import LLM
from agent.plans import get_plan
from agent.prompts import PromptRenderer
from agent.runner import Deps, run_plan
from agent.state import RunState
from tools.types import Chunk, Hit

_WORD = re.compile(r"\w+")


# -- fakes: a word-overlap retriever over an in-memory store ------------------------------
class FakeStore:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks

    def get(self, row):
        return self.chunks[row]

    def get_many(self, rows):
        return [self.chunks[r] for r in rows]

    def neighbours(self, row, radius=1):
        doc = self.chunks[row].doc_id
        return [r for r in range(row - radius, row + radius + 1)
                if r != row and 0 <= r < len(self.chunks) and self.chunks[r].doc_id == doc]


class FakeIndex:
    def __init__(self, docs: dict[str, list[str]], sparse_rows=()):
        chunks = [Chunk(doc_id=d, chunk_index=i, text=t, source=f"{d}.txt")
                  for d, parts in docs.items() for i, t in enumerate(parts)]
        self.store = FakeStore(chunks)
        self.sparse_rows = list(sparse_rows)


class FakeRetriever:
    """Score = number of distinct query words in the chunk; dense_score = that / chunk words."""

    def __init__(self, index: FakeIndex):
        self.index = index
        self.calls: list[dict] = []

    def run(self, query, top_k=10, *, rows=None, extra_texts=None):
        self.calls.append({"query": query, "top_k": top_k, "rows": rows, "extra_texts": list(extra_texts or [])})
        words = set(_WORD.findall(" ".join([query, *(extra_texts or [])]).lower()))
        scored = []
        for row, chunk in enumerate(self.index.store.chunks):
            if rows is not None and row not in rows:
                continue
            cw = set(_WORD.findall(chunk.text.lower()))
            overlap = len(words & cw)
            if overlap:
                scored.append((overlap, row, overlap / max(1, len(cw))))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [Hit(chunk=self.index.store.chunks[row], row=row, score=float(s), rank=i, dense_score=d)
                for i, (s, row, d) in enumerate(scored[:top_k], start=1)]


# -- a scripted model that reads the prompts --------------------------------------------
def judge_chunks(prompt: str) -> dict[str, str]:
    body = prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0]
    return json.loads(body)


class Script:
    """Dispatches on the prompt: judge / answer / validate. Records what it was asked."""

    def __init__(self, judge=None, answer="The answer [1].", validate=True):
        self.judge = judge or (lambda q, text: True)
        self.answer = answer
        self.validate = validate  # bool, list of bools (one per call), or a callable
        self.kinds: list[str] = []
        self.judged_texts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, messages):
        prompt = messages[0]["content"]
        if "mapping an index to the chunk's text" in prompt:
            with self._lock:
                self.kinds.append("judge")
            chunks = judge_chunks(prompt)
            self.judged_texts.extend(chunks.values())
            question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
            return json.dumps({k: bool(self.judge(question, t)) for k, t in chunks.items()})
        if "Draft answer:" in prompt:
            self.kinds.append("validate")
            v = self.validate.pop(0) if isinstance(self.validate, list) else self.validate
            return v if isinstance(v, str) else json.dumps({"resolved": v, "reason": "scripted"})
        self.kinds.append("answer")
        return self.answer


def make_deps(docs, chat, *, sparse_rows=(), **loop):
    cfg = Config()
    cfg.loop = cfg.loop.model_copy(update={"judge_concurrency": 1, **loop})
    index = FakeIndex(docs, sparse_rows)
    return Deps(config=cfg, retriever=FakeRetriever(index), index=index, llm=LLM(chat), prompts=PromptRenderer(),
                extras={})


def run(deps, question, plan="agentic"):
    state = RunState(question=question, plan=plan)
    return run_plan(get_plan(plan, deps.config), state, deps, deps.config.max_steps)


def steps(state):
    return [(e.step, e.outcome) for e in state.trace]


# A corpus where the relevant chain is found hop by hop: the question names "alpha";
# the alpha chunk names "bravo", the bravo chunk names "charlie".
CHAIN = {
    "a": ["alpha project leader is bravo person"],
    "b": ["bravo person was born in charlie town"],
    "c": ["charlie town lies on the delta river"],
    "n1": ["unrelated words about cooking pasta"],
    "n2": ["alpha particles in physics are helium nuclei"],
    "n3": ["weather report rain tomorrow"],
}
CHAIN_RELEVANT = ("alpha project", "bravo person was born", "charlie town lies")


def chain_judge(question, text):
    return any(text.startswith(p) for p in CHAIN_RELEVANT)


def test_converges_when_relevant_set_stops_growing():
    script = Script(judge=chain_judge)
    deps = make_deps(CHAIN, FakeChat(default=script), candidates=1, expand_k=1, max_iterations=10, final_k=3,
                     neighbours=False)
    state = run(deps, "Where was the alpha project leader born?")
    assert steps(state) == [
        ("retrieve", "next"), ("judge", "next"), ("expand", "grew"), ("judge", "next"), ("expand", "grew"),
        ("judge", "next"), ("expand", "grew"), ("judge", "next"), ("expand", "converged"),
        ("draft", "next"), ("validate", "resolved"), ("answer", "next"),
    ]
    assert state.notes["loop_stop"] == "relevant set did not grow in the last judge round"
    assert state.relevant == ["a#0", "b#0", "c#0"]
    assert [r["new_relevant"] for r in state.notes["judge_rounds"]] == [["a#0"], ["b#0"], ["c#0"], []]
    assert {h.chunk_id for h in state.context} >= {"a#0", "b#0", "c#0"}
    # never re-judged: every judged text appears once
    assert len(script.judged_texts) == len(set(script.judged_texts))
    # the expansion query carried the relevant chunk texts
    assert deps.retriever.calls[1]["extra_texts"] == [CHAIN["a"][0]]
    assert state.trace[2].summary["new_candidates"]
    # the resolved draft is reused by the answer step: one answer call only
    assert script.kinds.count("answer") == 1


def test_budget_stop_bounds_the_loop():
    script = Script(judge=lambda q, t: True)  # says yes to everything: would grow forever
    docs = {f"d{i}": [f"alpha word{i} and alpha more{i}"] for i in range(30)}
    deps = make_deps(docs, FakeChat(default=script), candidates=2, expand_k=2, max_iterations=20,
                     max_llm_calls=3, uninformative_min_n=10, neighbours=False)
    state = run(deps, "alpha?")
    assert "LLM-call budget reached" in state.notes["loop_stop"]
    assert script.kinds.count("judge") == 3
    assert [s for s, _ in steps(state)].count("judge") == 3


def test_max_iterations_stop():
    script = Script(judge=lambda q, t: True)
    docs = {f"d{i}": [f"alpha word{i}"] for i in range(30)}
    deps = make_deps(docs, FakeChat(default=script), candidates=2, expand_k=2, max_iterations=2,
                     uninformative_min_n=10, neighbours=False)
    state = run(deps, "alpha?")
    assert state.notes["loop_stop"] == "max_iterations=2 reached"
    assert script.kinds.count("judge") == 2


SPLIT = {
    "lumen/keys.py": [
        "def rotate_api_key(workspace):\n    \"\"\"Rotate the API key of a Lumen workspace.\"\"\"\n    issue_key(workspace)",
        "    previous.expire_after(hours=24)  # grace period",
        "def list_keys(ws):\n    return ws.keys",
    ],
    "docs/other.md": ["The workspace settings page lists members and billing."],
}


def test_neighbour_expansion_recovers_a_function_split_across_chunks():
    # the second half of the function shares no word with the question: retrieval alone misses it
    script = Script(judge=lambda q, t: "rotate_api_key" in t or "previous.expire_after" in t,
                    answer="The old key expires after 24 hours [1].")
    deps = make_deps(SPLIT, FakeChat(default=script), candidates=2, expand_k=2, final_k=2)
    question = "How do I rotate the API key of a Lumen workspace?"
    first = deps.retriever.run(question, top_k=10)
    assert "lumen/keys.py#1" not in [h.chunk_id for h in first]
    state = run(deps, question)
    grew = [e for e in state.trace if e.step == "expand" and e.outcome == "grew"][0]
    assert "lumen/keys.py#1" in grew.summary["neighbours"]
    assert state.relevant == ["lumen/keys.py#0", "lumen/keys.py#1"]
    assert [h.chunk_id for h in state.context] == ["lumen/keys.py#0", "lumen/keys.py#1"]
    assert state.notes["selection"]["promoted"] == ["lumen/keys.py#1"]


FALLBACK_DOCS = {
    "main": ["the alpha code overview", "the alpha code details"],
    "noise": ["alpha noise"],
    "rare": ["zeta appendix: alpha secret value 42"],
}
FALLBACK_Q = "What is the alpha code?"


def fallback_deps(script, tmp_path):
    from tools.rerank import Reranker

    deps = make_deps(FALLBACK_DOCS, FakeChat(default=script), sparse_rows=[2, 3], candidates=2, final_k=2,
                     max_iterations=1)
    deps.extras["reranker"] = Reranker(cache_dir=tmp_path)  # offline: embedding order, said so
    return deps


def test_failed_validation_takes_the_sparse_fallback_then_answers(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t or "secret" in t, validate=[False, True],
                    answer="The value is 42 [1].")
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    assert steps(state) == [
        ("retrieve", "next"), ("judge", "next"), ("expand", "converged"), ("draft", "next"),
        ("validate", "unresolved"), ("fallback", "next"), ("draft", "next"), ("validate", "resolved"),
        ("answer", "next"),
    ]
    assert state.notes["loop_stop"] == "max_iterations=1 reached"
    fb = next(e for e in state.trace if e.step == "fallback").summary
    assert deps.retriever.calls[-1]["rows"] == [2, 3]
    assert fb["rerank"] == "embedding" and "unavailable" in fb["rerank_note"]
    assert fb["candidates"] == ["noise#0", "rare#0"]  # dense_score order: 1/2 > 1/6
    assert fb["added"] == ["rare#0"] and fb["judge_mode"] == "judge"
    assert [h.chunk_id for h in state.context] == ["main#0", "main#1", "rare#0"]
    assert state.fallback_used and state.resolved is True
    assert state.answer == "The value is 42 [1]."
    assert script.kinds == ["judge", "answer", "validate", "judge", "answer", "validate"]


def test_second_failed_validation_is_exhausted_and_still_answers(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t, validate=[False, False], answer="Not sure [1].")
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    tail = steps(state)[-5:]
    assert tail == [("validate", "unresolved"), ("fallback", "next"), ("draft", "next"),
                    ("validate", "exhausted"), ("answer", "next")]
    assert state.answer == "Not sure [1]."
    assert script.kinds.count("validate") == 2


def test_validator_malformed_json_defaults_to_unresolved(tmp_path):
    script = Script(judge=lambda q, t: "overview" in t, validate=["no json", "still none", True])
    deps = fallback_deps(script, tmp_path)
    state = run(deps, FALLBACK_Q)
    first = next(e for e in state.trace if e.step == "validate")
    assert first.outcome == "unresolved" and first.summary["default"] == "unresolved"
    assert "StructuredOutputError" in first.summary["reason"]
    assert first.usage.calls == 2  # the ask and the one re-ask
    assert ("fallback", "next") in steps(state)


def test_malformed_judge_json_reasks_once_then_falls_back_to_scores():
    chat = FakeChat(["definitely not json", "{\"1\": true}"], default=Script())  # 2nd misses key "2"
    deps = make_deps(CHAIN, chat, candidates=2, final_k=1, neighbours=False)
    state = run(deps, "Where was the alpha project leader born?")
    judge = state.trace[1]
    assert judge.step == "judge" and judge.usage.calls == 2
    assert judge.summary["mode"] == "failed"
    assert "StructuredOutputError" in judge.summary["batches"][0]["failed"]
    # the re-ask carried the validation error and the schema
    reask = chat.history[1]["messages"][-1]["content"]
    assert "not valid" in reask and '"1"' in reask
    # score-based decision: the first-stage top final_k chunk is relevant, the other not
    assert state.judged == {state.first_stage[0]: True, state.first_stage[1]: False}
    assert "no usable verdicts" in state.notes["loop_stop"]
    assert [h.chunk_id for h in state.context] == state.first_stage[:1]
    assert state.answer is not None


def test_endpoint_error_in_one_batch_is_recorded_and_the_rest_is_trusted():
    script = Script(judge=chain_judge)
    chat = FakeChat([EndpointError("down after 5 attempts")], default=script)
    deps = make_deps(CHAIN, chat, candidates=4, judge_batch_size=2, final_k=2, neighbours=False,
                     max_iterations=1, uninformative_min_n=10)
    state = run(deps, "alpha project leader born bravo")
    report = state.notes["judge_rounds"][0]
    assert report["batches"][0]["failed"].startswith("EndpointError")
    assert report["mode"] == "judge" and "decided by retrieval score" in report["reason"]
    assert set(report["decided_by_score"]) == set(state.first_stage[:2])


@pytest.mark.parametrize("verdict", [True, False])
def test_uninformative_judge_falls_back_to_the_fast_context(verdict):
    script = Script(judge=lambda q, t: verdict)
    docs = {f"d{i}": [f"alpha topic number{i}"] for i in range(12)}
    deps = make_deps(docs, FakeChat(default=script), candidates=10, final_k=5)
    state = run(deps, "alpha topic?")
    report = state.notes["judge_rounds"][0]
    assert report["mode"] == "score"
    assert report["reason"].startswith("all 10")
    assert [h.chunk_id for h in state.context] == state.first_stage[:5]
    assert state.notes["selection"]["same_as_fast"] is True
    assert state.relevant == state.first_stage[:5]
    assert "no usable verdicts" in state.notes["loop_stop"]
    assert script.kinds.count("judge") == 2  # batches of 8 + 2, no second round


def test_judge_disagreeing_with_retrieval_is_not_trusted():
    docs = {f"d{i}": [" ".join(["alpha"] + [f"w{j}" for j in range(12 - i)]) + f" tag{i}"] for i in range(10)}
    # retriever ranks by overlap: make the question share more words with the low-numbered docs
    question = "alpha " + " ".join(f"w{j}" for j in range(12))
    script = Script(judge=lambda q, t: t.endswith(("tag8", "tag9")))
    deps = make_deps(docs, FakeChat(default=script), candidates=10, final_k=3, judge_batch_size=10)
    state = run(deps, question)
    assert state.first_stage[-2:] == ["d8#0", "d9#0"]
    report = state.notes["judge_rounds"][0]
    assert report["mode"] == "score" and "beyond chance" in report["reason"]
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]


# -- decoys: certainly-irrelevant control chunks hidden among the candidates --------------------
class VecIndex(FakeIndex):
    """FakeIndex with bag-of-words unit vectors, so the least similar chunks can serve as decoys."""

    def __init__(self, docs, sparse_rows=()):
        super().__init__(docs, sparse_rows)
        import numpy as np

        self.vocab = sorted({w for c in self.store.chunks for w in _WORD.findall(c.text.lower())})
        self.vectors = np.stack([self._vec(c.text) for c in self.store.chunks])

    def _vec(self, text):
        import numpy as np

        v = np.zeros(len(self.vocab), dtype=np.float32)
        for w in _WORD.findall(text.lower()):
            if w in self.vocab:
                v[self.vocab.index(w)] += 1
        norm = np.linalg.norm(v)
        return v / norm if norm else v

    def embed_query(self, text):
        return self._vec(text)


DECOY_DOCS = {
    **{f"d{i}": [f"alpha topic number{i} item"] for i in range(8)},
    **{f"z{i}": [f"zebra grazing savanna grass herd{i}"] for i in range(9)},
}


def decoy_deps(judge, **loop):
    script = Script(judge=judge)
    deps = make_deps({}, FakeChat(default=script), **{"candidates": 6, "final_k": 3, "judge_decoys": 3,
                                                      "judge_batch_size": 10, **loop})
    deps.index = VecIndex(DECOY_DOCS)
    deps.retriever = FakeRetriever(deps.index)
    return deps, script


def test_a_judge_calling_a_decoy_relevant_is_not_trusted():
    # answers "relevant" for the 2nd, 4th... chunk it sees: looks informative, but it hits decoys
    seen = {"n": 0}

    def alternating(q, t):
        seen["n"] += 1
        return seen["n"] % 2 == 0

    deps, script = decoy_deps(alternating)
    state = run(deps, "alpha topic item")
    report = state.notes["judge_rounds"][0]
    assert report["decoys"] == 3 and report["decoys_relevant"] >= 1
    assert report["mode"] == "score" and "decoys" in report["reason"]
    assert "round 1" in state.notes["judge_distrusted"]
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert not any(cid.startswith("z") for cid in state.judged)  # decoys are never recorded
    assert sum("zebra" in t for t in script.judged_texts) == 3


def test_a_judge_rejecting_decoys_is_trusted_and_decoys_rotate():
    deps, script = decoy_deps(lambda q, t: "number5" in t or "number1" in t, candidates=4, expand_k=2,
                              max_iterations=2)
    state = run(deps, "alpha topic item")
    rounds = state.notes["judge_rounds"]
    assert [r["mode"] for r in rounds] == ["judge", "judge"]
    assert all(r["decoys"] == 3 and r["decoys_relevant"] == 0 for r in rounds)
    assert "judge_distrusted" not in state.notes
    assert state.relevant == ["d1#0", "d5#0"]
    assert [h.chunk_id for h in state.context][:2] == ["d1#0", "d5#0"]
    zebras = [t for t in script.judged_texts if "zebra" in t]
    assert len(zebras) == 6 and len(set(zebras)) == 6  # round 2 shows the next least-similar chunks


def test_distrust_in_a_later_round_withdraws_earlier_verdicts():
    # round 1: judges well; round 2: says yes to everything, decoys included
    calls = {"n": 0}

    def judge(q, t):
        calls["n"] += 1
        return "number1" in t if calls["n"] <= 7 else True

    deps, script = decoy_deps(judge, candidates=4, expand_k=2, max_iterations=3)
    state = run(deps, "alpha topic item")
    rounds = state.notes["judge_rounds"]
    assert [r["mode"] for r in rounds] == ["judge", "score"]
    assert "round 2" in state.notes["judge_distrusted"]
    assert [h.chunk_id for h in state.context] == state.first_stage[:3]
    assert state.notes["selection"]["same_as_fast"] is True
