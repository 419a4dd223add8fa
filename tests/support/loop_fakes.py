"""Fakes for the agentic-loop tests: a word-overlap retriever over an in-memory store, a scripted judge."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np

from ragsieve.agent.config import Config
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.agent.plan.plans import get_plan
from ragsieve.agent.plan.runner import run_plan
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit

WORD = re.compile(r"\w+")


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
        return [
            r
            for r in range(row - radius, row + radius + 1)
            if r != row and 0 <= r < len(self.chunks) and self.chunks[r].doc_id == doc
        ]


class FakeIndex:
    """The `IndexBackend` members the steps read, over an in-memory store; no stored vectors (`vectors` None:
    the steps score the hits they have) and no folder (`root` does not exist: no calibration)."""

    def __init__(self, docs: dict[str, list[str]], sparse_rows=()):
        chunks = [
            Chunk(doc_id=d, chunk_index=i, text=t, source=f"{d}.txt") for d, parts in docs.items() for i, t in enumerate(parts)
        ]
        self.store = FakeStore(chunks)
        self.sparse_rows = list(sparse_rows)
        self.vectors = None
        self.root = Path("/nonexistent/ragsieve-fake-index")
        self.manifest: dict = {}
        self.model_name = "fake"

    def __len__(self):
        return len(self.store.chunks)

    def filter_rows(self, where):
        return list(range(len(self.store.chunks)))

    symbols = None

    def embedding_placement(self) -> str:
        return "fake (no encoder)"

    def close(self):
        pass


class FakeRetriever:
    """Score = number of distinct query words in the chunk; dense_score = that / chunk words."""

    where = None  # no metadata filter

    def __init__(self, index: FakeIndex):
        self.index = index
        self.calls: list[dict] = []

    def admit(self, rows):
        return list(rows)

    def run(self, query, top_k=10, *, rows=None, extra_texts=None):
        self.calls.append({"query": query, "top_k": top_k, "rows": rows, "extra_texts": list(extra_texts or [])})
        words = set(WORD.findall(" ".join([query, *(extra_texts or [])]).lower()))
        scored = []
        for row, chunk in enumerate(self.index.store.chunks):
            if rows is not None and row not in rows:
                continue
            cw = set(WORD.findall(chunk.text.lower()))
            overlap = len(words & cw)
            if overlap:
                scored.append((overlap, row, overlap / max(1, len(cw))))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [
            Hit(chunk=self.index.store.chunks[row], row=row, score=float(s), rank=i, dense_score=d)
            for i, (s, row, d) in enumerate(scored[:top_k], start=1)
        ]


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
    pool = loop.pop("candidates", None)  # the candidate pool (retrieval.pool) the judge sees first
    if pool is not None:
        cfg.retrieval = cfg.retrieval.model_copy(update={"pool": pool})
    if "final_k" in loop:  # these tests call the first final_k chunks "the fast context"
        cfg.retrieval = cfg.retrieval.model_copy(update={"top_k": loop["final_k"]})
    # the order check doubles round 1's calls: off here so call counts stay readable; its own tests turn it on
    cfg.loop = cfg.loop.model_copy(update={"judge_concurrency": 1, "judge_order_check": False, **loop})
    index = FakeIndex(docs, sparse_rows)
    return Deps(config=cfg, retriever=FakeRetriever(index), index=index, llm=LLM(chat), prompts=PromptRenderer())


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


# -- decoys: certainly-irrelevant control chunks hidden among the candidates --------------------
class VecIndex(FakeIndex):
    """FakeIndex with bag-of-words unit vectors, so the least similar chunks can serve as decoys."""

    def __init__(self, docs, sparse_rows=()):
        super().__init__(docs, sparse_rows)
        self.vocab = sorted({w for c in self.store.chunks for w in WORD.findall(c.text.lower())})
        self.vectors = np.stack([self._vec(c.text) for c in self.store.chunks])

    def _vec(self, text):
        v = np.zeros(len(self.vocab), dtype=np.float32)
        for w in WORD.findall(text.lower()):
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
    deps = make_deps(
        {}, FakeChat(default=script), **{"candidates": 6, "final_k": 3, "judge_decoys": 3, "judge_batch_size": 10, **loop}
    )
    deps.index = VecIndex(DECOY_DOCS)
    deps.retriever = FakeRetriever(deps.index)
    return deps, script
