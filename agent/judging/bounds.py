"""The confidence bounds `auto` holds a measured judge to (issue 56), from its calibration record
(`ragsieve.agent.judging.measure.JudgeReliability`): whether it is barred (decoys, near misses), whether its
relevant set may stand alone (recall and precision), and whether its "nothing relevant" may abstain (recall).
Each is a one-sided Clopper-Pearson bound on a binomial rate measured on the calibration questions."""

from __future__ import annotations

from scipy.stats import beta

from ragsieve.agent.config import LoopConfig
from ragsieve.agent.judging.measure import JudgeReliability


def recall_lower_bound(k: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson lower bound on a binomial rate (a judge's recall, its decoy acceptance) from `k`
    successes in `n` trials (Clopper & Pearson, Biometrika 1934): the rate p at which seeing `k` or more
    successes has probability 1 - `confidence`."""
    if n <= 0 or k <= 0:
        return 0.0
    return float(beta.ppf(1.0 - confidence, k, n - k + 1))


def judge_barred(
    reliability: JudgeReliability | None,
    max_rate: float,
    confidence: float,
    max_near_miss: float = 1.0,
    max_order_flips: float = 1.0,
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
    which of retrieval's best chunks do not hold the answer.

    And to the order check (`order_compared` / `order_flipped`): a judge whose verdicts change, bounded below, more
    often than `max_order_flips` (`loop.order_max_flips`, the line the per-question check holds a round to) when the
    same chunks come in reversed order judges by position (issue 56's `primacy` judge); per question it would be
    caught on nearly every question, after its first round and the check were paid for, so it is barred. The
    re-judged verdicts of one question are not independent draws, so this bound is looser than it reads, as the
    decoys' is (three a question); a judge biased only now and then stays below it and is caught per question."""
    if reliability is None:
        return False, ""
    reasons: list[str] = []
    barred = False
    for what, shown, called, line, setting in (
        (
            "called {} of {} calibration decoys relevant",
            reliability.decoys,
            reliability.decoys_relevant,
            max_rate,
            "loop.trust_decoy_rate",
        ),
        (
            "called {} of {} near misses (pool chunks without the answer) relevant",
            reliability.near_misses,
            reliability.near_misses_relevant,
            max_near_miss,
            "loop.trust_near_miss_rate",
        ),
        (
            "changed {} of {} verdicts when the same chunks came in reversed order",
            reliability.order_compared,
            reliability.order_flipped,
            max_order_flips,
            "loop.order_max_flips",
        ),
    ):
        if shown <= 0:
            continue
        bound = recall_lower_bound(called, shown, confidence)
        over = bound > line
        barred = barred or over
        reasons.append(
            f"judge {what.format(called, shown)}: lower bound {bound:.3f} at "
            f"{confidence:.0%} confidence {'>' if over else '<='} {setting} {line}"
        )
    if not reasons:
        return False, ""
    if barred:  # name only the measurement(s) that bar it
        reasons = [r for r in reasons if " > " in r]
    return barred, "; ".join(reasons)


def barred_under(reliability: JudgeReliability | None, loop: LoopConfig) -> tuple[bool, str]:
    """`judge_barred` with the lines `loop` sets (the order check's only when `loop.judge_order_check` is on)."""
    return judge_barred(
        reliability,
        loop.trust_decoy_rate,
        loop.trust_confidence,
        loop.trust_near_miss_rate,
        loop.order_max_flips if loop.judge_order_check else 1.0,
    )


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
