"""A judge measured on an index's calibration questions (`ragsieve calibrate --judge N`): its recall, its
near-miss and decoy acceptance, its precision, and the fast context's and the pool's recall beside them. What
`auto` makes of the record: `ragsieve.agent.judging.reliability` (the rule) and `ragsieve.agent.judging.bounds`
(the bars and the bounds)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from pydantic import BaseModel, Field

from ragsieve.agent.judging.checks import interleave, order_agreement
from ragsieve.agent.judging.rounds import order_items


class JudgeReliability(BaseModel):
    """One judge model measured on one index's calibration questions."""

    model: str
    n: int = Field(ge=0)  # questions whose answer-bearing chunk was in the judged pool
    questions: int = Field(ge=0)  # questions judged
    judge_recall: float | None  # None when n == 0
    false_positive_rate: float | None  # other pool chunks called relevant (an upper bound: some may be relevant)
    fast_recall: float | None = None  # answer's chunk within the first `top_k` hits of the retriever
    pool_recall: float | None = None  # answer's chunk within the pool
    top_k: int = 5
    failed: int = 0  # questions whose every judge batch failed
    pool: int
    created: str = ""
    # control chunks (the least similar to the question, `judging.checks.pick_decoys`) hidden among the pool,
    # as the loop's first round hides them, and how many the judge called relevant; 0: not measured
    decoys: int = Field(0, ge=0)
    decoys_relevant: int = Field(0, ge=0)
    # near misses (issue 56): the pool's chunks that calibration labels as not answer-bearing, i.e. retrieval's most
    # similar non-answer text, and how many the judge called relevant; `answer_called`: answer-bearing pool chunks
    # the judge called relevant (precision = answer_called / (answer_called + near_misses_relevant)); 0: not measured
    near_misses: int = Field(0, ge=0)
    near_misses_relevant: int = Field(0, ge=0)
    answer_called: int = Field(0, ge=0)
    # the loop's order check (c) at calibration: the verdicts re-judged in reversed order (the decoys excepted) and how
    # many changed; 0: not measured (`loop.judge_order_check` off, or a record written before)
    order_compared: int = Field(0, ge=0)
    order_flipped: int = Field(0, ge=0)


def measure_judge(
    items: Iterable[tuple],
    judge: Callable[[str, list[Any]], dict[str, bool]],
    *,
    model: str,
    pool: int,
    top_k: int,
    decoys: Callable[[str, set[str]], list[Any]] | None = None,
    order_k: int | None = None,
) -> JudgeReliability:
    """`items`: (question, ids of the answer-bearing chunks, pool hits in retrieval order[, ids of other chunks
    that bear the question's answer]). `judge(question, hits)` returns chunk id -> verdict (ids missing from it
    failed). Also measured: how often the answer's chunk is in the retriever's first `top_k` hits (the fast
    context) and in the pool; the near misses (every other pool chunk: retrieval's most similar non-answer text)
    the judge calls relevant, and the answer-bearing chunks it calls relevant (its precision); and, with `decoys`
    (question, ids to leave out) -> control hits, how often the judge calls a control chunk relevant (the
    controls are hidden among the pool at positions seeded by the question, as in the loop's rounds). The
    optional fourth element (a two-hop question's other gold paragraph) counts neither as a near miss nor
    toward recall; called relevant, it counts as a correct pick. With `order_k` (the loop's `final_k`), what the
    loop's order check would judge again (`rounds.order_items`) is judged again in reversed order, and the changed
    verdicts are counted (`order_compared`, `order_flipped`)."""
    hits_pos = shown_pos = called_neg = shown_neg = questions = failed = in_fast = in_pool_n = 0
    decoys_shown = decoys_called = answer_called = order_compared = order_flipped = 0
    for item in items:
        question, positives, hits = item[0], item[1], item[2]
        others: set[str] = set(item[3]) if len(item) > 3 else set()
        questions += 1
        ranks = [i for i, h in enumerate(hits[:pool]) if h.chunk_id in positives]
        in_fast += int(bool(ranks) and ranks[0] < top_k)
        in_pool_n += int(bool(ranks))
        controls = decoys(question, {h.chunk_id for h in hits} | positives) if decoys is not None else []
        control_ids = {h.chunk_id for h in controls}
        shown = interleave(list(hits), list(controls), question)
        verdicts = judge(question, shown)
        decoy_verdicts = [v for c, v in verdicts.items() if c in control_ids]
        verdicts = {c: v for c, v in verdicts.items() if c not in control_ids}
        if not verdicts:
            failed += 1
            continue
        if order_k is not None and len(shown) > 1:
            again = order_items(shown, control_ids, verdicts, [h.chunk_id for h in hits], order_k)
            agreed, flipped = order_agreement(verdicts, judge(question, list(reversed(again))))
            order_compared += len(agreed) + len(flipped)
            order_flipped += len(flipped)
        decoys_shown += len(decoy_verdicts)
        decoys_called += sum(1 for v in decoy_verdicts if v)
        in_pool = [h.chunk_id for h in hits if h.chunk_id in positives and h.chunk_id in verdicts]
        if in_pool:
            shown_pos += 1
            hits_pos += int(any(verdicts[c] for c in in_pool))
        negatives = [c for c, _ in verdicts.items() if c not in positives and c not in others]
        shown_neg += len(negatives)
        called_neg += sum(1 for c in negatives if verdicts[c])
        answer_called += sum(1 for c, v in verdicts.items() if v and (c in positives or c in others))
    return JudgeReliability(
        model=model,
        n=shown_pos,
        questions=questions,
        failed=failed,
        judge_recall=round(hits_pos / shown_pos, 4) if shown_pos else None,
        false_positive_rate=round(called_neg / shown_neg, 4) if shown_neg else None,
        pool=pool,
        top_k=top_k,
        fast_recall=round(in_fast / questions, 4) if questions else None,
        pool_recall=round(in_pool_n / questions, 4) if questions else None,
        decoys=decoys_shown,
        decoys_relevant=decoys_called,
        near_misses=shown_neg,
        near_misses_relevant=called_neg,
        answer_called=answer_called,
        order_compared=order_compared,
        order_flipped=order_flipped,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def llm_judge(llm: Any, prompts: Any, loop: Any) -> Callable[[str, list[Any]], dict[str, bool]]:
    """The pipeline's own judge prompt and batching, one pass, as a `measure_judge` callback."""
    from ragsieve.agent.judging.batches import run_pass, split_verdicts

    def judge(question: str, hits: list[Any]) -> dict[str, bool]:
        verdicts, _, _, _ = split_verdicts(run_pass(question, hits, llm=llm, prompts=prompts, loop=loop), set())
        return verdicts

    return judge
