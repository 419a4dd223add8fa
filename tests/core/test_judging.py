"""ragsieve.agent.judging.rounds: batching, per-batch schema, concurrency, and the trust checks."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest
from pydantic import ValidationError

from ragsieve.agent.config import LoopConfig
from ragsieve.agent.judging.batches import batch_schema, make_batches
from ragsieve.agent.judging.checks import assess_verdicts, interleave, pick_decoys, rank_sum_pvalue
from ragsieve.agent.judging.rounds import budget_reason, judge_candidates
from ragsieve.agent.llm.chat import Usage
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk, Hit


def hit(i: int, text: str = "") -> Hit:
    return Hit(
        chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=text or f"text {i}", source="s"), row=i, score=1.0 / (i + 1), rank=i + 1
    )


def test_make_batches_respects_count_and_character_budget():
    hits = [hit(i, "x" * 100) for i in range(7)]
    assert [len(b) for b in make_batches(hits, 3, 10_000, 1000)] == [3, 3, 1]
    assert [len(b) for b in make_batches(hits, 10, 250, 1000)] == [2, 2, 2, 1]
    # chunk texts are counted as cut to chunk_chars
    assert [len(b) for b in make_batches(hits, 10, 250, 50)] == [5, 2]
    # one chunk bigger than the budget still forms its own batch (never dropped)
    assert [len(b) for b in make_batches([hit(0, "y" * 900)], 4, 200, 1000)] == [1]
    assert make_batches([], 4, 200, 1000) == []
    flat = [h.chunk_id for b in make_batches(hits, 3, 10_000, 1000) for h in b]
    assert flat == [h.chunk_id for h in hits]


def test_batch_schema_has_exactly_the_batch_indexes():
    schema = batch_schema(3)
    js = schema.model_json_schema()
    assert set(js["properties"]) == {"1", "2", "3"} and set(js["required"]) == {"1", "2", "3"}
    ok = schema.model_validate({"1": True, "2": False, "3": True})
    assert ok.model_dump(by_alias=True) == {"1": True, "2": False, "3": True}
    with pytest.raises(ValidationError):
        schema.model_validate({"1": True, "2": False})  # missing key
    with pytest.raises(ValidationError):
        schema.model_validate({"1": True, "2": False, "3": True, "4": False})  # extra key
    with pytest.raises(ValidationError):
        schema.model_validate({"1": True, "2": False, "3": "maybe"})  # not a boolean


def test_rank_sum_pvalue_matches_brute_force():
    for n in range(2, 9):
        for k in range(1, n):
            sums = [sum(c) for c in itertools.combinations(range(1, n + 1), k)]
            for observed in itertools.combinations(range(1, n + 1), k):
                w = sum(observed)
                expected = sum(1 for s in sums if s >= w) / len(sums)
                assert rank_sum_pvalue(list(observed), n) == pytest.approx(expected)
    assert rank_sum_pvalue([], 5) == 1.0 and rank_sum_pvalue([1, 2], 2) == 1.0
    assert rank_sum_pvalue([9, 10], 10) == pytest.approx(1 / 45)


def test_assess_verdicts_rules():
    ids = [f"c{i}" for i in range(10)]
    all_true = {c: True for c in ids}
    all_false = {c: False for c in ids}
    assert assess_verdicts(all_true, ids, first_round=True, min_n=4, alpha=0.05)[0] is False
    # first round, all irrelevant: without decoys to check the judge it is no judge ...
    informative, reason = assess_verdicts(all_false, ids, first_round=True, min_n=4, alpha=0.05)
    assert informative is False and "no decoys" in reason
    # ... a judge that was shown decoys (and rejected them: the caller checks that first) is believed
    assert assess_verdicts(all_false, ids, first_round=True, min_n=4, alpha=0.05, decoys_shown=3) == (True, "")
    # all relevant stays uninformative whatever the decoys
    assert assess_verdicts(all_true, ids, first_round=True, min_n=4, alpha=0.05, decoys_shown=3)[0] is False
    # later rounds: "nothing new is relevant" is believable
    assert assess_verdicts(all_false, ids, first_round=False, min_n=4, alpha=0.05)[0] is True
    # too few chunks to call it uninformative
    assert assess_verdicts({"c0": True, "c1": True}, ids, first_round=True, min_n=4, alpha=0.05)[0] is True
    # disagreement far beyond chance: the two worst-ranked are the only relevant ones (p = 1/45)
    bottom = {c: c in ("c8", "c9") for c in ids}
    informative, reason = assess_verdicts(bottom, ids, first_round=True, min_n=4, alpha=0.05)
    assert not informative and "p=0.022" in reason
    # a typical good judge: ranks 1 and 7
    good = {c: c in ("c0", "c6") for c in ids}
    assert assess_verdicts(good, ids, first_round=True, min_n=4, alpha=0.05) == (True, "")


def test_budget_reason():
    loop = LoopConfig(max_llm_calls=3, max_total_tokens=1000)
    assert budget_reason(Usage(calls=2, prompt_tokens=10), loop) is None
    assert "LLM-call budget" in budget_reason(Usage(calls=3), loop)
    assert "token budget" in budget_reason(Usage(calls=1, prompt_tokens=900, completion_tokens=100), loop)


def test_batches_run_concurrently_but_bounded():
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def reply(messages):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        prompt = messages[0]["content"]
        chunks = json.loads(prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0])
        return json.dumps({k: "relevant" in v for k, v in chunks.items()})

    hits = [hit(i, "relevant" if i % 3 == 0 else "other") for i in range(12)]
    loop = LoopConfig(judge_batch_size=2, judge_concurrency=3)
    llm = LLM(FakeChat(default=reply))
    result = judge_candidates(
        "q", hits, llm=llm, prompts=PromptRenderer(), loop=loop, ranked_ids=[h.chunk_id for h in hits], first_round=True
    )
    assert len(result.batches) == 6 and llm.meter.snapshot().calls == 6
    assert 2 <= state["peak"] <= 3
    assert result.mode == "judge"
    assert [c for c, v in result.verdicts.items() if v] == ["d0#0", "d3#0", "d6#0", "d9#0"]


def test_every_batch_failing_is_mode_failed():
    llm = LLM(FakeChat(default="no json here"))
    loop = LoopConfig(judge_batch_size=2, judge_concurrency=2)
    hits = [hit(i) for i in range(4)]
    result = judge_candidates(
        "q", hits, llm=llm, prompts=PromptRenderer(), loop=loop, ranked_ids=[h.chunk_id for h in hits], first_round=True
    )
    assert result.mode == "failed" and result.trusted == {}
    assert result.failed == [h.chunk_id for h in hits]
    assert llm.meter.snapshot().calls == 4  # ask + one re-ask per batch, nothing more
    assert all("StructuredOutputError" in b.error for b in result.batches)


def test_interleave_keeps_order_and_is_seeded():
    hits = [hit(i) for i in range(6)]
    decoys = [hit(100 + i) for i in range(3)]
    a = interleave(hits, decoys, "q\n1")
    assert len(a) == 9
    assert [h for h in a if h.row < 100] == hits and [h for h in a if h.row >= 100] == decoys
    assert [h.row for h in interleave(hits, decoys, "q\n1")] == [h.row for h in a]
    positions = {tuple(i for i, h in enumerate(interleave(hits, decoys, f"q\n{s}")) if h.row >= 100) for s in range(20)}
    assert len(positions) > 5  # not always at the same places
    assert interleave(hits, [], "x") == hits


def test_pick_decoys_are_the_least_similar_chunks():
    import numpy as np

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(20, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[3] + 0.1

    class Store:
        def get_many(self, rows):
            return [Chunk(doc_id=f"r{r}", chunk_index=0, text=f"t{r}", source="s") for r in rows]

    class Index:
        store = Store()

        def __init__(self):
            self.vectors = vectors

        def embed_query(self, text):
            return query

    brute = sorted(range(20), key=lambda r: float(vectors[r] @ query))
    got = pick_decoys(Index(), "q", set(), 3)
    assert [h.row for h in got] == brute[:3]
    assert [h.row for h in pick_decoys(Index(), "q", set(), 3, skip=3)] == brute[3:6]
    assert all(h.extra["decoy"] == 1.0 for h in got)
    unvectored = Index()
    unvectored.vectors = None
    assert pick_decoys(unvectored, "q", set(), 3) == []  # no vectors: no decoys
    assert pick_decoys(None, "q", set(), 3) == []  # no index: none either
    assert pick_decoys(Index(), "q", set(), 0) == []


def test_a_refusal_fails_only_its_batch():
    from ragsieve.agent.errors import LLMError

    def yes_to_first(messages):
        prompt = messages[0]["content"]
        chunks = json.loads(prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0])
        return json.dumps({k: k == "1" for k in chunks})

    llm = LLM(FakeChat([LLMError("model m refused: I cannot help with that")], default=yes_to_first))
    loop = LoopConfig(judge_batch_size=3, judge_concurrency=1, uninformative_min_n=10)
    hits = [hit(i) for i in range(6)]
    result = judge_candidates(
        "q", hits, llm=llm, prompts=PromptRenderer(), loop=loop, ranked_ids=[h.chunk_id for h in hits], first_round=True
    )
    assert result.batches[0].error.startswith("LLMError: model m refused")
    assert result.failed == ["d0#0", "d1#0", "d2#0"]
    assert result.verdicts == {"d3#0": True, "d4#0": False, "d5#0": False}
    assert result.mode == "judge"
