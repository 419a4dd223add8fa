"""The first round's order check (c) settled after the round (issue 56: `full` costs less).

When the loop goes on after its first round, the chunks check (c) judges again lead the next round's pass in
reversed order instead of costing a call of their own (`judging.rounds.judge_candidates(recheck=...)`); when it
stops there, they are judged alone, as before. Either way the first round's trust is settled here, before any
later verdict counts: a decoy called relevant or too many changed verdicts distrust the judge for the question
(every verdict so far is decided by retrieval score, as for an uninformative first round), and a few changed
verdicts are decided by retrieval score. The expansion between the two rounds used the first round's verdicts
before they were checked; a judge the check catches decides nothing, so only what it cost is spent.
"""

from __future__ import annotations

from ragsieve.agent.core.state import JudgeMode, RunState
from ragsieve.agent.core.step import Deps
from ragsieve.agent.judging.batches import BatchReport, run_pass
from ragsieve.agent.judging.combine import score_based_relevant
from ragsieve.agent.judging.rounds import order_outcome


def pending(state: RunState) -> bool:
    return bool(state.loop.order_pending)


def settle_alone(state: RunState, deps: Deps) -> str:
    """Judge the deferred order check's chunks alone, reversed, and settle the first round; "" when it passed."""
    if not state.loop.order_pending:
        return ""
    reports = run_pass(
        state.question, list(reversed(state.loop.order_pending)), llm=deps.llm, prompts=deps.prompts, loop=deps.config.loop
    )
    return settle(state, deps, reports, with_round=None)


def settle(state: RunState, deps: Deps, reports: list[BatchReport], *, with_round: int | None) -> str:
    """Settle the first round from the reversed pass's `reports` (judged with round `with_round`, or alone);
    returns why the judge is distrusted, "" when the check passed."""
    loop, first = state.loop, state.loop.rounds[0]
    decoys = set(loop.order_decoys)
    outcome = order_outcome(dict(loop.trusted), reports, decoys, deps.config.loop)
    loop.order_pending, loop.order_decoys = [], []
    first.order_check = outcome.record() | {"judged_with_round": with_round}
    first.decoys, first.decoys_relevant = first.decoys + outcome.shown, first.decoys_relevant + outcome.called
    changed = list(state.judged) if outcome.failure else outcome.flipped
    by_score = set(score_based_relevant(changed, state.first_stage, deps.config.loop.final_k))
    for cid in changed:  # decided by retrieval score, as a round without usable verdicts decides them
        loop.trusted.pop(cid, None)
        state.judged[cid] = cid in by_score
    if outcome.failure:
        first.mode, first.reason = JudgeMode.SCORE, outcome.failure
        loop.distrusted = f"round 1: {outcome.failure}"
        loop.trusted.clear()
    first.decided_by_score = list(dict.fromkeys(first.decided_by_score + changed))
    relevant = [c for c in state.relevant if state.judged.get(c, True)]
    state.relevant[:] = relevant + [c for c in changed if state.judged[c] and c not in relevant]
    first.new_relevant = [c for c in first.new_relevant if state.judged.get(c)]
    first.relevant_total = len(state.relevant)
    return outcome.failure
