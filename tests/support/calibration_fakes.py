"""A tiny in-memory index (bag-of-words vectors, real BM25) and a scripted LLM for the calibrate workflow."""

from __future__ import annotations

import json
import re
import zlib

import numpy as np

from ragsieve.agent.llm.client import LLM
from ragsieve.testing import FakeChat
from ragsieve.testing.full_plan import fenced_text
from ragsieve.tools.index.search.bm25 import BM25Index
from ragsieve.tools.types import Chunk

DIM = 64


def bow(text: str) -> np.ndarray:
    """Deterministic bag-of-words embedding (hashed, normalised)."""
    v = np.zeros(DIM)
    for word in re.findall(r"[a-z]+", text.lower()):
        v[zlib.crc32(word.encode()) % DIM] += 1.0
    n = np.linalg.norm(v)
    return v / n if n else v


class TinyStore:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks

    def count(self):
        return len(self.chunks)

    def get(self, row):
        return self.chunks[row]

    def get_many(self, rows):
        return [self.chunks[r] for r in rows]

    def doc_rows(self, doc_id):
        return [r for r, c in enumerate(self.chunks) if c.doc_id == doc_id]


class TinyIndex:
    """What the calibration, steps and benchmark use of HybridIndex, over bag-of-words vectors."""

    model_name = "bow-test"

    def __init__(self, root, texts_by_doc: dict[str, list[str]], fingerprint="fp-1", bm25=True):
        chunks = [
            Chunk(doc_id=d, chunk_index=i, text=t, source=d, title=d)
            for d, texts in texts_by_doc.items()
            for i, t in enumerate(texts)
        ]
        self.root = root
        self.manifest = {"corpus_fingerprint": fingerprint, "embedding": {"model": self.model_name}}
        self.store = TinyStore(chunks)
        self.vectors = np.stack([bow(c.text) for c in chunks]).astype(np.float32)
        # the real BM25 index over the chunk texts: the hybrid score kinds read its whole-corpus scores
        self.bm25 = BM25Index().build([c.text for c in chunks]) if bm25 else None

    def embed(self, texts):
        return np.stack([bow(t) for t in texts])

    def embed_query(self, text):
        return bow(text)


FACTS = {
    "alpha.md": [
        "The alpha reactor runs on molten salt and produces heat for the northern city of Norvik.",
        "Alpha reactor maintenance happens every spring when the turbines are inspected by engineers from Norvik.",
    ],
    "beta.md": [
        "Beta bridges are painted orange because orange paint resists the coastal salt air best.",
        "The beta bridge toll is seven coins for carts and two coins for walkers crossing the river.",
    ],
    "gamma.md": [
        "Gamma gardens grow blue tulips that bloom only during the cold winter month of Frost.",
        "Gamma gardeners water the blue tulips with rain collected in copper barrels on the garden roofs.",
    ],
}


def scripted_llm(contains_says=None, fixed_question=None):
    """FakeChat answering both calibration prompts from their text (the judge is truthful by default)."""

    def reply(messages):
        prompt = messages[-1]["content"]
        if "write ONE question" in prompt:
            passage = fenced_text(prompt)
            words = re.findall(r"[A-Za-z]+", passage)
            question = fixed_question or f"What about {' '.join(words[:6])}?"
            return json.dumps({"question": question, "answer": " ".join(words[4:8])})
        question = re.search(r"Question: (.*)", prompt).group(1)
        answer = re.search(r"Expected answer: (.*)", prompt).group(1)
        passage = fenced_text(prompt)
        verdict = answer.lower() in passage.lower() if contains_says is None else contains_says(question, passage)
        return json.dumps({"contains": verdict})

    chat = FakeChat(default=reply)
    return LLM(chat), chat
