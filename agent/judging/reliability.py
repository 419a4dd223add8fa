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

Before any of that, `auto` asks whether the judge may decide at all (`bounds.judge_barred`: its measured
acceptance of decoys and of near misses, bounded below), and after it whether a `relevant` set may stand
alone and a "nothing relevant" abstain (`bounds.relevant_alone`, `bounds.abstention_supported`). The record
itself is measured by `ragsieve.agent.judging.measure`.
"""

from __future__ import annotations

import numpy as np

from ragsieve.agent.judging.measure import JudgeReliability
from ragsieve.agent.modes import ContextRule


def rank_recall(ranks: np.ndarray, k: int) -> float | None:
    """Share of calibration questions whose answer-bearing chunk ranks within `k` (inf = not found)."""
    ranks = np.asarray(ranks, dtype=float)
    return None if ranks.size == 0 else float(np.mean(ranks <= k))


def decide_rule(
    configured: str,
    reliability: JudgeReliability | None,
    ranks: np.ndarray | None,
    *,
    top_k: int,
    pool: int,
    margin: float,
    min_n: int,
    coverage: float | None = None,
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
    stat = (
        f"; fast recall {fast:.3f} > conformal coverage {coverage:.2f}: statistics = conformal set + fast context"
        if with_fast
        else ""
    )
    if reliability is None or reliability.judge_recall is None:
        return (
            ContextRule.UNION,
            with_fast,
            (f"auto: union (this judge was not measured on this index; `ragsieve calibrate --judge 60` measures it{stat})"),
        )
    if reliability.n < min_n:
        return (
            ContextRule.UNION,
            with_fast,
            (f"auto: union (judge measured on {reliability.n} questions, fewer than loop.trust_min_n = {min_n}{stat})"),
        )
    if fast is None or pooled is None:
        return ContextRule.UNION, with_fast, "auto: union (no measured recall to compare the judge with the fast context)"
    expected = reliability.judge_recall * pooled
    facts = (
        f"judge recall {reliability.judge_recall:.3f} (n={reliability.n}) x pool recall {pooled:.3f} = "
        f"{expected:.3f} vs fast recall {fast:.3f} - margin {margin}"
    )
    if coverage is not None and expected < coverage:  # narrowing must keep the conformal guarantee
        return (
            ContextRule.UNION,
            with_fast,
            (
                f"auto: union ({facts}; {expected:.3f} < conformal coverage "
                f"{coverage:.2f}: the relevant set alone would not keep 1 - alpha{stat})"
            ),
        )
    if expected >= fast - margin:
        return ContextRule.RELEVANT, with_fast, f"auto: relevant ({facts}{stat})"
    return ContextRule.UNION, with_fast, f"auto: union ({facts}{stat})"
