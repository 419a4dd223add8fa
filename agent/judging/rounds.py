"""Listwise JSON relevance judging: batches, schema, failures, and when verdicts are trusted.

Judging (semi-supervised retrieval, Minnaar 2023)
    Candidates are split into batches of at most `loop.judge_batch_size`
    chunks and `loop.judge_batch_chars` characters of chunk text (each chunk
    cut to `loop.judge_chunk_chars`). Each batch is one `judge.j2` prompt
    holding `{index: text}` (indexes 1..b of that batch) and the question; the
    reply must match a pydantic model built for exactly those indexes:
    required boolean fields, extra keys forbidden. Batches run concurrently on
    a ThreadPoolExecutor of `loop.judge_concurrency` workers.

Failure fallback
    When a batch fails (`StructuredOutputError` after the LLM's one re-ask, a
    refusal, or `EndpointError` after the client's retries: any `LLMError`),
    its chunks get no verdict and are decided by retrieval score like an
    uninformative round (below). The error is recorded in the round report;
    nothing is re-asked beyond the LLM's own re-ask, so a round costs at most
    two calls per batch.

A judge that knows when it is no judge
    A question's first round hides `loop.judge_decoys` control chunks among
    the candidates (at seeded random positions): the chunks whose embeddings
    are least similar to the question's, i.e. certainly irrelevant (the "gold
    question" / honeypot check of crowdsourcing quality control; Oleson et al.
    2011, "Programmatic gold"). Decoy verdicts are never recorded as judgments.
    The controls are checked once per question (issue 56): a judge caught there
    decides nothing for the question; later rounds show none, nor does the
    fallback's round when the loop's judge is trusted for the question.
    A round's verdicts are *uninformative* when
    (0) the judge calls any decoy relevant (a judge answering at random with
        rate p passes d decoys with probability (1-p)^d); or
    (a) at least `loop.uninformative_min_n` chunks were judged and every one
        came back true, or every one false in the first round *without
        decoys* to check the judge (no index vectors, `loop.judge_decoys = 0`).
        A first round judged all false by a judge that was shown decoys and
        passed (0) and (when `loop.judge_order_check` is on) the order check (c)
        is trusted: the judge says none of
        retrieval's best passages is relevant, which is a signal for calibrated
        abstention (the answer step abstains unless the calibrated answerability
        score says the question is answerable; `ragsieve.agent.steps.answer`),
        not a reason to distrust it; in later rounds all-false just means
        nothing new was found; or
    (b) the judge disagrees with retrieval far beyond chance: the chunks it
        calls relevant sit so low in the retrieval ranking that the exact
        one-sided rank-sum test (Wilcoxon 1945; Mann & Whitney 1947) gives
        p <= `loop.disagreement_alpha` under the null hypothesis that the
        verdicts are unrelated to the ranking.
    (c) order check (`loop.judge_order_check`, first round only, and only
        when (0)-(b) passed): the decoys, the chunks called relevant and the
        rejected ones retrieval would keep are judged again in reversed order
        (so in other batches and positions; `order_items`). A decoy called
        relevant there, or more than `loop.order_max_flips` of the verdicts
        changing, makes the round uninformative (position bias, not
        relevance); otherwise only the verdicts both orders agree on are
        trusted and the changed ones are decided by retrieval score. It costs
        a fraction of the first round's chunks, and no call of its own when
        the loop goes on (issue 56): the re-judged chunks, reversed, lead the
        next round's pass (`recheck`), and the first round's trust is settled
        from that pass before the next round's verdicts count
        (`ragsieve.agent.core.order`); when the loop stops after the first
        round they are judged alone, as one more call.
    The checks live in `ragsieve.agent.judging.checks`.
    Such a round (and a failed batch) falls back to *score-based selection*
    (`ragsieve.agent.judging.combine.score_based_relevant`). Verdicts
    of informative rounds are *trusted*; but a judge caught once is not
    trusted for the rest of the question: an uninformative round withdraws
    the verdicts of earlier rounds from the combination rule too (the loop
    stops there), and the fallback does not ask it again.

Combination with retrieval
    `ragsieve.agent.judging.combine` turns trusted verdicts and the first-stage ranking into
    the final context (the rule, and why the judge alone never decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragsieve.agent.config import LoopConfig
from ragsieve.agent.judging.batches import BatchReport, run_pass, split_reports, split_verdicts
from ragsieve.agent.judging.checks import assess_verdicts, interleave, order_agreement
from ragsieve.agent.judging.modes import JudgeMode
from ragsieve.agent.llm.chat import Usage
from ragsieve.tools.types import Hit


# -- one round ------------------------------------------------------------
@dataclass
class JudgeRound:
    """Verdicts of one round. `mode`: "judge" (trusted), "score" (uninformative) or "failed"."""

    batches: list[BatchReport] = field(default_factory=list)
    verdicts: dict[str, bool] = field(default_factory=dict)  # raw verdicts of successful batches
    failed: list[str] = field(default_factory=list)  # ids whose batch failed
    mode: JudgeMode = JudgeMode.JUDGE
    reason: str = ""
    decoys: int = 0  # control chunks shown
    decoys_relevant: int = 0  # of those, judged relevant
    # check (c): what it judges again, and the decoys among them (the caller judges them: `ragsieve.agent.core.order`)
    order_pending: list[Hit] = field(default_factory=list)
    order_decoys: set[str] = field(default_factory=set)
    recheck: list[BatchReport] | None = None  # the earlier round's re-judged chunks, from this round's pass

    @property
    def trusted(self) -> dict[str, bool]:
        return dict(self.verdicts) if self.mode is JudgeMode.JUDGE else {}


def judge_candidates(
    question: str,
    hits: list[Hit],
    *,
    llm: Any,
    prompts: Any,
    loop: LoopConfig,
    ranked_ids: list[str],
    first_round: bool,
    decoys: list[Hit] | None = None,
    seed: str = "",
    order_check: bool = False,
    recheck: list[Hit] | None = None,
) -> JudgeRound:
    """Judge `hits` (with `decoys` hidden among them) in concurrent batches; assess the verdicts.

    `ranked_ids` are the hits that have a retrieval rank, best first (the
    disagreement test uses only those). `seed` fixes the decoy positions.
    `order_check`: an informative round says what check (c) of the module docstring judges again
    (`order_pending`), for the caller to judge alone or with its next round (`ragsieve.agent.core.order`). `recheck`: an earlier round's deferred check, judged in reversed order ahead of `hits` in
    the same pass; its batches come back in `recheck`, apart from this round's verdicts.
    """
    if not hits:
        return JudgeRound(mode=JudgeMode.JUDGE, reason="nothing to judge")
    decoys = [d for d in (decoys or []) if d.chunk_id not in {h.chunk_id for h in hits}]
    decoy_ids = {d.chunk_id for d in decoys}
    items = interleave(hits, decoys, f"{question}\n{seed}")
    ahead = list(reversed(recheck or []))
    reports = run_pass(question, ahead + items, llm=llm, prompts=prompts, loop=loop)
    rechecked: list[BatchReport] | None = None
    if recheck is not None:
        rechecked, reports = split_reports(reports, {h.chunk_id for h in ahead})
    result = JudgeRound(batches=reports, recheck=rechecked)
    result.verdicts, result.failed, result.decoys, result.decoys_relevant = split_verdicts(reports, decoy_ids)
    if not result.verdicts:
        result.mode, result.reason = JudgeMode.FAILED, "every judge batch failed"
        return result
    if result.decoys_relevant:
        result.mode = JudgeMode.SCORE
        result.reason = (
            f"judge called {result.decoys_relevant} of {result.decoys} decoys (chunks least similar to the question) relevant"
        )
        return result
    informative, reason = assess_verdicts(
        result.verdicts,
        ranked_ids,
        first_round=first_round,
        min_n=loop.uninformative_min_n,
        alpha=loop.disagreement_alpha,
        decoys_shown=result.decoys,
    )
    if not informative:
        result.mode, result.reason = JudgeMode.SCORE, reason
        return result
    if order_check and len(items) > 1:
        result.order_pending = order_items(items, decoy_ids, result.verdicts, ranked_ids, loop.final_k)
        result.order_decoys = decoy_ids
    if result.failed:
        result.reason = f"{len(result.failed)} chunk(s) of failed batches decided by retrieval score"
    return result


def order_items(
    items: list[Hit], decoy_ids: set[str], verdicts: dict[str, bool], ranked_ids: list[str], final_k: int
) -> list[Hit]:
    """What check (c) judges again: the decoys, the chunks called relevant, and the rejected ones retrieval would
    keep (`ranked_ids[:final_k]`, `combine.score_based_relevant`). A changed verdict is decided by retrieval score,
    so a rejected chunk retrieval rejects too keeps its decision whatever a second look says (issue 56: the whole
    pool again was a third of `full`'s tokens); a positional judge's picks still land on decoys or flip."""
    keep = set(ranked_ids[:final_k])
    return [h for h in items if h.chunk_id in decoy_ids or verdicts.get(h.chunk_id) or h.chunk_id in keep]


@dataclass
class OrderOutcome:
    """Check (c) on one reversed pass: verdicts compared and changed, decoys shown and called relevant, and why
    the round is uninformative ("" when it passed)."""

    compared: int
    flipped: list[str]
    shown: int
    called: int
    batches: list[dict[str, Any]]
    failure: str = ""

    def record(self) -> dict[str, Any]:
        return {"compared": self.compared, "flipped": self.flipped, "decoys_relevant": self.called, "batches": self.batches}


def order_outcome(first: dict[str, bool], reports: list[BatchReport], decoy_ids: set[str], loop: LoopConfig) -> OrderOutcome:
    """Compare the first verdicts with the reversed pass's `reports`."""
    second, _failed, shown, called = split_verdicts(reports, decoy_ids)
    agreed, flipped = order_agreement(first, second)
    compared = len(agreed) + len(flipped)
    failure = ""
    if called:
        failure = f"in reversed order the judge called {called} of {shown} decoys relevant"
    elif compared and len(flipped) > loop.order_max_flips * compared:
        failure = (
            f"judge changed {len(flipped)} of {compared} verdicts when the order was reversed "
            f"(> {loop.order_max_flips:.0%}: position bias, not relevance)"
        )
    return OrderOutcome(compared, flipped, shown, called, [b.public() for b in reports], failure)


def budget_reason(usage: Usage, loop: LoopConfig) -> str | None:
    """Why the LLM budget is spent, or None."""
    if usage.calls >= loop.max_llm_calls:
        return f"LLM-call budget reached ({usage.calls} >= {loop.max_llm_calls})"
    tokens = usage.prompt_tokens + usage.completion_tokens
    if tokens >= loop.max_total_tokens:
        return f"token budget reached ({tokens} >= {loop.max_total_tokens})"
    return None
