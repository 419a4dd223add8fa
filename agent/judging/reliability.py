"""How far to trust the judge, measured: the decision between judged and statistical evidence.

`loop.combine = "auto"` (the default) chooses, per index and per judge model, between the
judge's relevant set in place of the fast context (`relevant`, Minnaar 2023) and the relevant set plus
the conformal set and, where measured stronger, the fast context (`union`), from two numbers measured
at calibration time. Both keep the conformal set (issue 46: the choice rests on judge recall measured on
30-60 questions, a point estimate, so the coverage 1 - alpha is not left to it):

- `judge_recall`: the share of calibration questions whose answer-bearing chunk, when it is in
  the candidate pool, the judge calls relevant (one judge pass over the pool, with the loop's decoys
  hidden in it);
- `pool_recall` and `fast_recall`: the share of calibration questions whose answer-bearing chunk
  ranks within the pool (`retrieval.pool`) and within the fast context (`retrieval.top_k`), read
  from the calibration records' similarity ranks.

The relevant set alone can keep the answer's chunk only if the pool holds it and the judge says
so, so its expected gold recall is about `judge_recall x pool_recall`; the `fast` context keeps it
with `fast_recall`. `auto` chooses `relevant` when

    judge_recall x pool_recall >= fast_recall - loop.trust_margin      (default margin 0.02)

and the expected recall also reaches the conformal coverage 1 - alpha (narrowing the context
below the conformal set must not break its guarantee), and `union` otherwise: the union keeps every chunk the relevant set keeps, so a noisy judge costs
context tokens, not recall. A judge that was never measured gets `union` and a note saying how to
measure it (`ragsieve calibrate --judge N`). The statistical side is chosen the same way: when the
fast context's measured recall is above the conformal coverage 1 - alpha (a strong first stage, as
on SQuAD), it is the conformal set plus the fast context, else the conformal set alone. The
recalls are measured with the retriever itself (hybrid ranks) when the judge was measured, else
read from the calibration records' similarity ranks. benchmarks/pipeline.py measures the rule.

Before any of that, `auto` asks whether the judge may decide at all (`judge_barred`): calibration hides
`loop.judge_decoys` control chunks among each question's pool, as the loop's rounds do, and counts those
the judge calls relevant. A judge whose rate of accepting them is, bounded below at `loop.trust_confidence`,
above `loop.trust_decoy_rate` decides nothing for any question: the per-question checks would catch it on
most questions and trust it on the rest, where its false picks join the context.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable

import numpy as np
from pydantic import BaseModel, Field
from scipy.stats import beta

from ragsieve.agent.judging.checks import interleave
from ragsieve.agent.modes import ContextRule


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


def measure_judge(items: Iterable[tuple[str, set[str], list[Any]]], judge: Callable[[str, list[Any]], dict[str, bool]],
                  *, model: str, pool: int, top_k: int,
                  decoys: Callable[[str, set[str]], list[Any]] | None = None) -> JudgeReliability:
    """`items`: (question, ids of the answer-bearing chunks, pool hits in retrieval order). `judge(question,
    hits)` returns chunk id -> verdict (ids missing from it failed). Also measured: how often the answer's
    chunk is in the retriever's first `top_k` hits (the fast context) and in the pool; and, with `decoys`
    (question, ids to leave out) -> control hits, how often the judge calls a control chunk relevant (the
    controls are hidden among the pool at positions seeded by the question, as in the loop's rounds)."""
    hits_pos = shown_pos = called_neg = shown_neg = questions = failed = in_fast = in_pool_n = 0
    decoys_shown = decoys_called = 0
    for question, positives, hits in items:
        questions += 1
        ranks = [i for i, h in enumerate(hits[:pool]) if h.chunk_id in positives]
        in_fast += int(bool(ranks) and ranks[0] < top_k)
        in_pool_n += int(bool(ranks))
        controls = decoys(question, {h.chunk_id for h in hits} | positives) if decoys is not None else []
        control_ids = {h.chunk_id for h in controls}
        verdicts = judge(question, interleave(list(hits), list(controls), question))
        decoy_verdicts = [v for c, v in verdicts.items() if c in control_ids]
        verdicts = {c: v for c, v in verdicts.items() if c not in control_ids}
        if not verdicts:
            failed += 1
            continue
        decoys_shown += len(decoy_verdicts)
        decoys_called += sum(1 for v in decoy_verdicts if v)
        in_pool = [h.chunk_id for h in hits if h.chunk_id in positives and h.chunk_id in verdicts]
        if in_pool:
            shown_pos += 1
            hits_pos += int(any(verdicts[c] for c in in_pool))
        negatives = [c for c, _ in verdicts.items() if c not in positives]
        shown_neg += len(negatives)
        called_neg += sum(1 for c in negatives if verdicts[c])
    return JudgeReliability(
        model=model, n=shown_pos, questions=questions, failed=failed,
        judge_recall=round(hits_pos / shown_pos, 4) if shown_pos else None,
        false_positive_rate=round(called_neg / shown_neg, 4) if shown_neg else None, pool=pool, top_k=top_k,
        fast_recall=round(in_fast / questions, 4) if questions else None,
        pool_recall=round(in_pool_n / questions, 4) if questions else None,
        decoys=decoys_shown, decoys_relevant=decoys_called, created=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def llm_judge(llm: Any, prompts: Any, loop: Any) -> Callable[[str, list[Any]], dict[str, bool]]:
    """The pipeline's own judge prompt and batching, one pass, as a `measure_judge` callback."""
    from ragsieve.agent.judging.rounds import run_pass, split_verdicts

    def judge(question: str, hits: list[Any]) -> dict[str, bool]:
        verdicts, _, _, _ = split_verdicts(run_pass(question, hits, llm=llm, prompts=prompts, loop=loop), set())
        return verdicts
    return judge


def recall_lower_bound(k: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson lower bound on a binomial rate (a judge's recall, its decoy acceptance) from `k`
    successes in `n` trials (Clopper & Pearson, Biometrika 1934): the rate p at which seeing `k` or more
    successes has probability 1 - `confidence`."""
    if n <= 0 or k <= 0:
        return 0.0
    return float(beta.ppf(1.0 - confidence, k, n - k + 1))


def judge_barred(reliability: JudgeReliability | None, max_rate: float, confidence: float) -> tuple[bool, str]:
    """Whether a measured judge decides nothing under `auto`, and why.

    The loop's decoy check catches a judge on one question with probability 1 - (1 - p)^d (d decoys, p its
    rate of calling an irrelevant chunk relevant); the rest of the time it passes and, trusted, adds what it
    wrongly accepts (issue 46: a judge flipping a quarter of its verdicts passed them on some of SQuAD's
    unanswerable questions, and there its picks held the plausible wrong answer). Calibration shows the same decoys on
    every question, so p is measured: when its one-sided Clopper-Pearson lower bound at `confidence` exceeds
    `max_rate`, the judge is, with that confidence, worse than the rate the loop's checks were set for, and it
    decides nothing for any question (its calls are saved: the context is the statistical evidence). A judge
    measured before decoys were shown (`decoys == 0`) is not barred."""
    if reliability is None or reliability.decoys <= 0:
        return False, ""
    bound = recall_lower_bound(reliability.decoys_relevant, reliability.decoys, confidence)
    facts = (f"judge called {reliability.decoys_relevant} of {reliability.decoys} calibration decoys relevant: "
             f"lower bound {bound:.3f} at {confidence:.0%} confidence")
    if bound > max_rate:
        return True, f"{facts} > loop.trust_decoy_rate {max_rate}"
    return False, f"{facts} <= loop.trust_decoy_rate {max_rate}"


def relevant_alone(reliability: JudgeReliability | None, coverage: float | None, confidence: float
                   ) -> tuple[bool, str]:
    """Whether the trusted relevant set may stand alone, without the conformal set, and why.

    The relevant set alone keeps the answer's chunk when the pool holds it and the judge calls it relevant;
    `k` of the calibration questions saw both. When the Clopper-Pearson lower bound of that rate at
    `confidence` reaches the conformal coverage 1 - alpha, the relevant set keeps the answer's chunk with
    probability >= 1 - alpha, with confidence `confidence` over the calibration questions, under the
    exchangeability of new questions with them that split conformal assumes too (issue 46: a lower bound,
    not a point estimate). Otherwise the conformal set is kept beside the relevant set."""
    if reliability is None or reliability.judge_recall is None or coverage is None or reliability.questions <= 0:
        return False, ""
    k = round(reliability.judge_recall * reliability.n)
    bound = recall_lower_bound(k, reliability.questions, confidence)
    sign = ">=" if bound >= coverage else "<"
    return bound >= coverage, (f"answer's chunk in the pool and judged relevant on {k} of {reliability.questions} "
                               f"calibration questions: lower bound {bound:.3f} at {confidence:.0%} confidence {sign} "
                               f"coverage {coverage:.2f}")


def rank_recall(ranks: np.ndarray, k: int) -> float | None:
    """Share of calibration questions whose answer-bearing chunk ranks within `k` (inf = not found)."""
    ranks = np.asarray(ranks, dtype=float)
    return None if ranks.size == 0 else float(np.mean(ranks <= k))


def decide_rule(configured: str, reliability: JudgeReliability | None, ranks: np.ndarray | None, *,
                top_k: int, pool: int, margin: float, min_n: int, coverage: float | None = None
                ) -> tuple[ContextRule, bool, str]:
    """(rule to apply, whether the statistical evidence includes the fast context, why).

    Explicit rules are returned as they are (without the fast context). `auto`: see the module note;
    and when the fast context's measured recall exceeds the conformal coverage 1 - alpha, the
    statistical evidence is the conformal set plus the fast context (the union of two measured sets
    keeps at least what either keeps), used whenever the judge is not relied on alone."""
    rule = ContextRule(configured)
    if rule is not ContextRule.AUTO:
        return rule, False, f"loop.combine = {rule.value}"
    fast: float | None
    pooled: float | None
    if reliability is not None and reliability.fast_recall is not None:  # measured
        fast, pooled = reliability.fast_recall, reliability.pool_recall
    else:
        fast = rank_recall(ranks, top_k) if ranks is not None else None
        pooled = rank_recall(ranks, pool) if ranks is not None else None
    with_fast = fast is not None and coverage is not None and fast > coverage
    stat = (f"; fast recall {fast:.3f} > conformal coverage {coverage:.2f}: statistics = conformal set + fast context"
            if with_fast else "")
    if reliability is None or reliability.judge_recall is None:
        return ContextRule.UNION, with_fast, ("auto: union (this judge was not measured on this index; "
                                              f"`ragsieve calibrate --judge 60` measures it{stat})")
    if reliability.n < min_n:
        return ContextRule.UNION, with_fast, (f"auto: union (judge measured on {reliability.n} questions, "
                                              f"fewer than loop.trust_min_n = {min_n}{stat})")
    if fast is None or pooled is None:
        return ContextRule.UNION, with_fast, "auto: union (no measured recall to compare the judge with the fast context)"
    expected = reliability.judge_recall * pooled
    facts = (f"judge recall {reliability.judge_recall:.3f} (n={reliability.n}) x pool recall {pooled:.3f} = "
             f"{expected:.3f} vs fast recall {fast:.3f} - margin {margin}")
    if coverage is not None and expected < coverage:  # narrowing must keep the conformal guarantee
        return ContextRule.UNION, with_fast, (f"auto: union ({facts}; {expected:.3f} < conformal coverage "
                                              f"{coverage:.2f}: the relevant set alone would not keep 1 - alpha{stat})")
    if expected >= fast - margin:
        return ContextRule.RELEVANT, with_fast, f"auto: relevant ({facts}{stat})"
    return ContextRule.UNION, with_fast, f"auto: union ({facts}{stat})"
