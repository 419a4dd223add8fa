"""The judge's "nothing relevant" and the sparse fallback on real components (issue 46, item 2): a real index of
examples/ on the offline MiniLM embeddings, calibrated, with the scripted fake model as judge, reader and validator.

- A judge that passes its decoys and order check and calls every chunk irrelevant is trusted: the answer
  abstains without asking the model (unless the calibrated answerability score says answerable) and the
  fallback adds no chunk the judge did not accept.
- An untrusted judge (no decoys to check an all-false round, or one calling everything relevant) decides
  nothing: the model reads the fast context and the fallback adds no chunk (before, it appended the top reranked
  sparse chunks unjudged, near-miss text that made `full` answer unanswerable questions).
- A judge that cannot give a verdict at all (every batch malformed) leaves the fallback COS-Mix's score-based
  additions.
- A trusted judge's fallback adds exactly the sparse chunks it accepts; when it cannot be asked (budget
  spent), none.
Each fails on the code before issue 46: there the all-false round was distrusted and the fallback appended
unjudged chunks whatever the judge's standing.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import ragsieve.agent.steps.conformal  # noqa: F401  (registers the full plan's steps)
import ragsieve.agent.steps.fallback  # noqa: F401
import ragsieve.agent.steps.outliers  # noqa: F401
import ragsieve.agent.steps.segments  # noqa: F401
from ragsieve.agent.calibration import load_calibration
from ragsieve.agent.config import Config
from ragsieve.testing import FakeChat
from ragsieve.tools.metrics import is_abstention
from tests.core.test_full_plan import QUESTION, calibrated_index  # noqa: F401  (a fixture)
from tests.support.loop_fakes import Script

ANSWER = "Rotate the key in the workspace settings [1]."


def _ask(
    index,
    script: Script,
    question: str = QUESTION,
    *,
    loop: dict | None = None,
    abstention: dict | None = None,
    fallback: dict | None = None,
):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    if loop:
        config.loop = config.loop.model_copy(update=loop)
    if abstention:
        config.abstention = config.abstention.model_copy(update=abstention)
    if fallback:
        config.fallback = config.fallback.model_copy(update=fallback)
    with Orchestrator.open(index, config, chat=FakeChat(default=script)) as orch:
        return orch.ask(question, plan="full")


def _summaries(answer, step: str) -> list[dict]:
    return [e.summary for e in answer.trace if e.step == step]


def _sparse_rows(index) -> list[int]:
    from ragsieve.tools.index.local.index import HybridIndex

    with HybridIndex.open(index) as opened:
        return list(opened.sparse_rows)


def test_a_trusted_judge_finding_nothing_relevant_abstains_and_the_fallback_adds_nothing(calibrated_index):  # noqa: F811
    assert _sparse_rows(calibrated_index)  # the fallback has sparse chunks to offer
    script = Script(judge=lambda q, t: False, answer=ANSWER, validate=True)
    answer = _ask(calibrated_index, script)
    first = answer.loop.rounds[0]
    # it passed its checks: decoys shown and rejected, the same verdicts in reversed order
    assert first.mode == "judge" and first.decoys >= 1 and first.decoys_relevant == 0
    assert first.order_check is not None and first.order_check["flipped"] == []
    assert answer.loop.distrusted is None and first.judged >= 4
    # calibrated abstention: the small calibration gives no finite cutoff at 0.02, so nothing says answerable
    decision = _summaries(answer, "answer")[0]
    assert decision["answerability"]["answerable"] is False and "trusted" in decision["nothing_relevant"]
    assert answer.abstention == "no_evidence" and is_abstention(answer.answer)
    assert "answer" not in script.kinds and "validate" not in script.kinds  # the model never wrote an answer
    # the fallback ran (the abstention is unresolved), judged its sparse candidates and added none of them
    fb = answer.fallback
    assert fb is not None and fb.candidates and fb.judge_mode == "judge"
    assert fb.added == [] and not fb.score_based
    assert fb.decoys_relevant == "0 of 0"  # controls once per question: the trusted judge passed them in round 1
    passing = set(answer.conformal.passing) if answer.conformal else set()
    unjudged_in_context = [h.chunk_id for h in answer.context if h.chunk_id in fb.candidates and h.chunk_id not in passing]
    assert unjudged_in_context == []


def test_nothing_relevant_yields_to_calibrated_evidence_that_says_answerable(calibrated_index):  # noqa: F811
    from ragsieve.tools.index.local.index import HybridIndex

    cal, _ = load_calibration(calibrated_index)
    cutoff = cal.abstention.threshold(0.2)
    with HybridIndex.open(calibrated_index) as index:  # a question that is a chunk's own text scores ~1.0
        text = index.store.get(0).text
        score = float(np.max(index.vectors @ index.embed([text])[0]))
    assert score > cutoff
    script = Script(judge=lambda q, t: False, answer=ANSWER, validate=True)
    answer = _ask(calibrated_index, script, text, abstention={"max_false_answer": 0.2})
    assert answer.loop.distrusted is None and answer.loop.rounds[0].mode == "judge"
    decision = _summaries(answer, "answer")[0]
    assert decision["answerability"]["answerable"] is True and "the model reads the context" in decision["nothing_relevant"]
    assert "answer" in script.kinds and answer.abstention is None and answer.answer.startswith("Rotate the key")


@pytest.mark.parametrize(
    "judge, loop, reason",
    [
        (lambda q, t: False, {"judge_decoys": 0}, "no decoys were shown"),
        (lambda q, t: True, {}, "decoys"),
    ],
)
def test_an_untrusted_judge_decides_nothing_and_the_fallback_adds_nothing(
    calibrated_index,  # noqa: F811
    judge,
    loop,  # noqa: F811
    reason,
):
    script = Script(judge=judge, answer=ANSWER, validate=[False, False])
    answer = _ask(calibrated_index, script, loop=loop)
    first = answer.loop.rounds[0]
    assert first.mode == "score" and reason in first.reason and answer.loop.distrusted
    # the model read the context once: the fallback added nothing, so the run ended with that answer (issue 56)
    assert answer.abstention is None and script.kinds.count("answer") == 1 and script.kinds.count("validate") == 1
    assert [(e.step, e.outcome) for e in answer.trace][-1] == ("fallback", "unchanged")
    fb = answer.fallback
    assert fb.judge_mode == "skipped" and fb.candidates and not fb.score_based
    assert fb.added == [] and "adds nothing" in fb.judge_reason
    passing = set(answer.conformal.passing) if answer.conformal else set()
    fast = {h.chunk_id for h in answer.context[: Config().retrieval.top_k]}
    assert [h.chunk_id for h in answer.context if h.chunk_id in fb.candidates and h.chunk_id not in passing | fast] == []


class _Malformed(Script):
    """Every judge batch comes back as prose, not JSON: no verdict can be had."""

    def __call__(self, messages):
        if "mapping an index to the chunk's text" in messages[0]["content"]:
            self.kinds.append("judge")
            return "I think some of these are relevant."
        return super().__call__(messages)


def test_a_judge_that_gives_no_verdict_at_all_leaves_the_score_based_additions(calibrated_index):  # noqa: F811
    script = _Malformed(answer=ANSWER, validate=[False, False])
    answer = _ask(calibrated_index, script)
    assert answer.loop.distrusted is None and not answer.loop.judge_trusted
    fb = answer.fallback
    assert fb.judge_mode == "failed" and fb.score_based
    assert fb.added == fb.candidates[: Config().fallback.max_added] and fb.added
    context = [h.chunk_id for h in answer.context]
    assert all(c in context for c in fb.added)  # unjudged, and kept by every later filter


def _outside_pool(index, question: str, sparse: list[int]) -> tuple[str, str]:
    """(chunk id, text) of a sparse chunk the first retrieval does not return (so only the fallback offers it)."""
    from ragsieve.agent.orchestrator import Orchestrator

    with Orchestrator.open(index, Config()) as orch:
        pool = {h.chunk_id for h in orch.retrieve(question, top_k=Config().retrieval.pool)}
        chunks = orch.index.store.get_many(sparse)
    chunk = next(c for c in chunks if c.chunk_id not in pool)
    return chunk.chunk_id, chunk.text


def test_a_trusted_judges_fallback_adds_exactly_the_chunks_it_accepts(calibrated_index):  # noqa: F811
    sparse = _sparse_rows(calibrated_index)
    chosen, text = _outside_pool(calibrated_index, QUESTION, sparse)
    cut = Config().loop.judge_chunk_chars

    def judge(q, t):  # the api-keys passages; after the first validation (the fallback) also the chosen one
        return "rotat" in t.lower() or (t == text[:cut] and "validate" in script.kinds)

    script = Script(judge=judge, answer=ANSWER, validate=[False, True])
    answer = _ask(calibrated_index, script, loop={"max_iterations": 1}, fallback={"sparse_candidates": len(sparse)})
    assert answer.loop.distrusted is None and answer.loop.rounds[0].mode == "judge"
    fb = answer.fallback
    assert chosen in fb.candidates and len(fb.candidates) > 1
    assert fb.judge_mode == "judge" and fb.added == [chosen] and not fb.score_based
    assert chosen in [h.chunk_id for h in answer.context]


def test_a_trusted_judge_that_cannot_be_asked_in_the_fallback_adds_nothing(calibrated_index, tmp_path):  # noqa: F811
    folder = tmp_path / "copy"
    shutil.copytree(calibrated_index, folder)
    script = Script(judge=lambda q, t: "rotat" in t.lower(), answer=ANSWER, validate=[False, False])
    # one judge round fits the call budget; by the fallback it is spent
    answer = _ask(folder, script, loop={"max_llm_calls": 1, "max_iterations": 1})
    assert answer.loop.distrusted is None and answer.loop.rounds[0].mode == "judge"
    fb = answer.fallback
    assert fb.judge_mode == "skipped" and "budget" in fb.judge_reason and fb.candidates
    assert fb.added == [] and not fb.score_based and "only chunks it accepts" in fb.judge_reason
