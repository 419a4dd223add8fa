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
    # near misses (issue 56): the pool's chunks that calibration labels as not answer-bearing, i.e. retrieval's most
    # similar non-answer text, and how many the judge called relevant; `answer_called`: answer-bearing pool chunks
    # the judge called relevant (precision = answer_called / (answer_called + near_misses_relevant)); 0: not measured
    near_misses: int = Field(0, ge=0)
    near_misses_relevant: int = Field(0, ge=0)
    answer_called: int = Field(0, ge=0)


def measure_judge(
    items: Iterable[tuple],
    judge: Callable[[str, list[Any]], dict[str, bool]],
    *,
    model: str,
    pool: int,
    top_k: int,
    decoys: Callable[[str, set[str]], list[Any]] | None = None,
) -> JudgeReliability:
    """`items`: (question, ids of the answer-bearing chunks, pool hits in retrieval order[, ids of other chunks
    that bear the question's answer]). `judge(question, hits)` returns chunk id -> verdict (ids missing from it
    failed). Also measured: how often the answer's chunk is in the retriever's first `top_k` hits (the fast
    context) and in the pool; the near misses (every other pool chunk: retrieval's most similar non-answer text)
    the judge calls relevant, and the answer-bearing chunks it calls relevant (its precision); and, with `decoys`
    (question, ids to leave out) -> control hits, how often the judge calls a control chunk relevant (the
    controls are hidden among the pool at positions seeded by the question, as in the loop's rounds). The
    optional fourth element (a two-hop question's other gold paragraph) counts neither as a near miss nor
    toward recall; called relevant, it counts as a correct pick."""
    hits_pos = shown_pos = called_neg = shown_neg = questions = failed = in_fast = in_pool_n = 0
    decoys_shown = decoys_called = answer_called = 0
    for item in items:
        question, positives, hits = item[0], item[1], item[2]
        others: set[str] = set(item[3]) if len(item) > 3 else set()
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
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


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


def judge_barred(
    reliability: JudgeReliability | None, max_rate: float, confidence: float, max_near_miss: float = 1.0
) -> tuple[bool, str]:
    """Whether a measured judge decides nothing under `auto`, and why.

    The loop's decoy check catches a judge on one question with probability 1 - (1 - p)^d (d decoys, p its
    rate of calling an irrelevant chunk relevant); the rest of the time it passes and, trusted, adds what it
    wrongly accepts (issue 46: a judge flipping a quarter of its verdicts passed them on some of SQuAD's
    unanswerable questions, and there its picks held the plausible wrong answer). Calibration shows the same decoys on
    every question, so p is measured: when its one-sided Clopper-Pearson lower bound at `confidence` exceeds
    `max_rate`, the judge is, with that confidence, worse than the rate the loop's checks were set for, and it
    decides nothing for any question (its calls are saved: the context is the statistical evidence). A judge
    measured before decoys were shown (`decoys == 0`) is not barred.

    Decoys are the corpus's least similar chunks: a judge that rejects only text sharing nothing with the
    question passes them (issue 56's over-eager judge, which accepted about 78 % of the pool's non-answer chunks).
    The same rule therefore applies to the near misses (`JudgeReliability.near_misses`: the pool's chunks the
    calibration labels as not answer-bearing): a judge whose near-miss acceptance, bounded below, exceeds
    `max_near_miss` is barred too; no per-question check can see that failure, since only calibration knows
    which of retrieval's best chunks do not hold the answer."""
    if reliability is None:
        return False, ""
    reasons: list[str] = []
    barred = False
    for kind, shown, called, line, setting in (
        ("calibration decoys", reliability.decoys, reliability.decoys_relevant, max_rate, "loop.trust_decoy_rate"),
        (
            "near misses (pool chunks without the answer)",
            reliability.near_misses,
            reliability.near_misses_relevant,
            max_near_miss,
            "loop.trust_near_miss_rate",
        ),
    ):
        if shown <= 0:
            continue
        bound = recall_lower_bound(called, shown, confidence)
        over = bound > line
        barred = barred or over
        reasons.append(
            f"judge called {called} of {shown} {kind} relevant: lower bound {bound:.3f} at "
            f"{confidence:.0%} confidence {'>' if over else '<='} {setting} {line}"
        )
    if not reasons:
        return False, ""
    if barred:  # name only the measurement(s) that bar it
        reasons = [r for r in reasons if " > " in r]
    return barred, "; ".join(reasons)


def recall_evidence(reliability: JudgeReliability | None, confidence: float) -> tuple[int, int, float] | None:
    """(k, questions, lower bound): calibration questions whose answer's chunk was in the pool and judged relevant,
    of all questions judged, and the rate's one-sided Clopper-Pearson lower bound; None when not measured."""
    if reliability is None or reliability.judge_recall is None or reliability.questions <= 0:
        return None
    k = round(reliability.judge_recall * reliability.n)
    return k, reliability.questions, recall_lower_bound(k, reliability.questions, confidence)


def precision_evidence(reliability: JudgeReliability | None, confidence: float) -> tuple[int, int, float] | None:
    """(answer-bearing chunks called relevant, all pool chunks called relevant, the precision's lower bound);
    None when near misses were not measured (a record written before issue 56)."""
    if reliability is None or reliability.near_misses <= 0:
        return None
    called = reliability.answer_called + reliability.near_misses_relevant
    return reliability.answer_called, called, recall_lower_bound(reliability.answer_called, called, confidence)


def relevant_alone(reliability: JudgeReliability | None, coverage: float | None, confidence: float) -> tuple[bool, str]:
    """Whether the trusted relevant set may stand alone, without the conformal set, and why.

    Recall: the relevant set alone keeps the answer's chunk when the pool holds it and the judge calls it relevant;
    `k` of the calibration questions saw both. When the Clopper-Pearson lower bound of that rate at
    `confidence` reaches the conformal coverage 1 - alpha, the relevant set keeps the answer's chunk with
    probability >= 1 - alpha, with confidence `confidence` over the calibration questions, under the
    exchangeability of new questions with them that split conformal assumes too (issue 46: a lower bound,
    not a point estimate). Precision (issue 56): the relevant set alone is also all the reader sees, so what it
    holds besides the answer is near-miss text with no conformal set beside it; it stands alone only when the
    share of its calibration picks that bear the answer, bounded below the same way, also reaches 1 - alpha: at most
    alpha of what it puts in the context is non-answer text, the error rate the conformal step is allowed. An
    over-eager judge has recall 1.0 and fails here. Otherwise the conformal set is kept beside the relevant set."""
    recall = recall_evidence(reliability, confidence)
    if recall is None or coverage is None:
        return False, ""
    k, questions, bound = recall
    why = (
        f"answer's chunk in the pool and judged relevant on {k} of {questions} calibration questions: lower "
        f"bound {bound:.3f} at {confidence:.0%} confidence {'>=' if bound >= coverage else '<'} coverage {coverage:.2f}"
    )
    precision = precision_evidence(reliability, confidence)
    if precision is None:
        return False, why + "; precision not measured (`ragsieve calibrate --judge N` measures it)"
    right, called, p_bound = precision
    why += (
        f"; {right} of its {called} calibration picks bear the answer: precision lower bound {p_bound:.3f} "
        f"{'>=' if p_bound >= coverage else '<'} coverage {coverage:.2f}"
    )
    return bound >= coverage and p_bound >= coverage, why


def abstention_supported(reliability: JudgeReliability | None, coverage: float | None, confidence: float) -> tuple[bool, str]:
    """Whether a trusted judge's "nothing relevant" may make the answer abstain by itself, and why (issue 56).

    Such an abstention is wrong on an answerable question exactly when the judge misses the answer's chunk (or
    the pool lacks it): the event whose rate `relevant_alone` bounds. It is allowed only when that recall's
    lower bound reaches the conformal coverage 1 - alpha, so a wrong "nothing relevant" abstention is no more
    likely than the conformal set missing the answer. A judge measured below it (issue 56's over-strict judge,
    recall 0.73) cannot abstain by itself: the model reads the context (the conformal set, which is kept beside
    an empty relevant set). A judge never measured keeps the earlier behaviour (the calibrated answerability
    score decides)."""
    recall = recall_evidence(reliability, confidence)
    if recall is None or coverage is None:
        return True, ""
    k, questions, bound = recall
    supported = bound >= coverage
    return supported, (
        f"judge recall {k} of {questions} calibration questions: lower bound {bound:.3f} at "
        f"{confidence:.0%} confidence {'>=' if supported else '<'} coverage {coverage:.2f}"
    )


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
