"""Judge the unjudged candidates (see `ragsieve.agent.judging.rounds` for batching, fallbacks and trust)."""

from __future__ import annotations

from ragsieve.agent.core import order
from ragsieve.agent.core.evidence import applied_rule
from ragsieve.agent.core.state import JudgeMode, JudgeRoundReport, RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.judging.checks import pick_decoys
from ragsieve.agent.judging.combine import score_based_relevant
from ragsieve.agent.judging.rounds import JudgeRound, budget_reason, judge_candidates


class Judge(Step[Next]):
    """Judges `state.candidates` never judged before; appends new relevant ids to `state.relevant`.

    Kept in `state.loop` for the expand step and the trace: `rounds` (one
    report per round), `trusted` (id -> verdict of informative rounds),
    `discovered` (every candidate id in the order it was offered), `distrusted`
    (why the judge is not trusted for this question, once a round was uninformative, or before any round
    when `auto` barred the judge on its measured decoy acceptance: then it is not asked).
    """

    name = "judge"

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        loop = deps.config.loop
        rounds, trusted, discovered = state.loop.rounds, state.loop.trusted, state.loop.discovered
        todo, seen = [], set()
        for hit in state.candidates:
            if hit.chunk_id not in state.judged and hit.chunk_id not in seen:
                todo.append(hit)
                seen.add(hit.chunk_id)
                if hit.chunk_id not in discovered:
                    discovered.append(hit.chunk_id)
        state.remember(todo)
        number = len(rounds) + 1
        ids = [h.chunk_id for h in todo]
        spent = budget_reason(deps.need_llm().meter.snapshot(), loop)
        applied_rule(state, deps)  # under `auto`, a judge measured to accept decoys is barred before any call
        barred = state.loop.barred
        outcome: JudgeRound | None = None
        if not todo:
            outcome = JudgeRound(mode=JudgeMode.JUDGE, reason="no unjudged candidates")
        elif barred:
            outcome = JudgeRound(mode=JudgeMode.SKIPPED, reason=f"not judged: the judge decides nothing ({barred})")
            outcome.failed = list(ids)
            state.loop.distrusted = f"calibration: {barred}"
        elif spent:
            outcome = JudgeRound(mode=JudgeMode.SKIPPED, reason=f"not judged: {spent}")
            outcome.failed = list(ids)
        if order.pending(state) and (not todo or barred or spent):  # no pass to share: the check goes alone
            order.settle_alone(state, deps)
        if outcome is None:
            neighbours = state.loop.neighbour_of
            ranked = [cid for cid in ids if cid not in neighbours]
            # controls once per question (issue 56): the first round and its order check show them; a judge caught
            # there decides nothing for the question, one that passed judges the expansion rounds without them
            decoys = pick_decoys(
                deps.index, state.question, set(ids), loop.judge_decoys if number == 1 else 0, admit=deps.admitted
            )
            outcome = judge_candidates(
                state.question,
                todo,
                llm=deps.llm,
                prompts=deps.prompts,
                loop=loop,
                ranked_ids=ranked,
                first_round=number == 1,
                decoys=decoys,
                seed=str(number),
                order_check=number == 1 and loop.judge_order_check,
                recheck=list(state.loop.order_pending) if order.pending(state) else None,
            )
            if outcome.recheck is not None:  # the first round's check came back with this round's verdicts
                failure = order.settle(state, deps, outcome.recheck, with_round=number)
                if failure:  # caught once, not trusted for the rest of the question: this round decides nothing
                    outcome.mode = JudgeMode.SCORE
                    outcome.reason = f"the first round's order check, judged with this round: {failure}"
        if outcome.mode is JudgeMode.SCORE and not state.loop.distrusted:
            state.loop.distrusted = f"round {number}: {outcome.reason}"
        decided = dict(outcome.trusted)
        undecided = [cid for cid in ids if cid not in decided]
        by_score = set(score_based_relevant(undecided, state.first_stage, loop.final_k))
        decided.update({cid: cid in by_score for cid in undecided})
        new_relevant = [cid for cid in ids if decided[cid] and cid not in state.relevant]
        for cid in ids:
            state.judged[cid] = decided[cid]
        trusted.update(outcome.trusted)
        state.relevant.extend(new_relevant)
        report = JudgeRoundReport(
            round=number,
            judged=len(ids),
            mode=outcome.mode,
            reason=outcome.reason,
            batches=[b.public() for b in outcome.batches],
            decoys=outcome.decoys,
            decoys_relevant=outcome.decoys_relevant,
            raw_true=sorted(c for c, v in outcome.verdicts.items() if v),
            decided_by_score=list(undecided),
            new_relevant=new_relevant,
            relevant_total=len(state.relevant),
        )
        rounds.append(report)
        if outcome.order_pending:
            state.loop.order_pending, state.loop.order_decoys = outcome.order_pending, sorted(outcome.order_decoys)
            if new_relevant and state.loop.order_deferrable and loop.max_iterations > 1:
                # the loop can go on: the check rides with the next round's pass (or goes alone when it stops)
                report.order_check = {"deferred": "judged again, reversed, with the next round's chunks"}
            else:  # the loop stops here, or the plan has no next round to share: the check goes alone, now
                order.settle_alone(state, deps)
        return StepResult("next", report)
