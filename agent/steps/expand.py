"""Query expansion with the relevant chunks, neighbour offers, and the loop's stop rule."""

from __future__ import annotations

from typing import Literal, TypedDict

from ragsieve.agent.core import order
from ragsieve.agent.core.evidence import applied_rule
from ragsieve.agent.core.state import JudgeMode, JudgeRoundReport, RunState
from ragsieve.agent.core.step import Deps, Step, StepResult, Target
from ragsieve.agent.core.summaries import GrewSummary
from ragsieve.agent.judging.combine import evidence_keys, fit_budget, relevant_set, select_context
from ragsieve.agent.judging.rounds import budget_reason
from ragsieve.agent.modes import ContextRule
from ragsieve.tools.types import Hit

Grown = Literal["grew", "converged"]  # the relevant set grew (judge again) or stopped growing


class GrownEdges(TypedDict):
    grew: Target
    converged: Target


class Expand(Step[Grown, GrownEdges]):
    """`grew`: new unjudged candidates are waiting for the judge. `converged`: the loop stops.

    Stop reasons, checked in this order: the last judge round gave no usable
    verdicts (uninformative judge, every batch failed, budget); the relevant
    set did not grow in the last round; `loop.max_iterations` judge rounds
    done; the LLM-call/token budget is reached; expansion found no new
    candidates. On `converged` the context is made by `converged_context`.
    """

    name = "expand"

    def run(self, state: RunState, deps: Deps) -> StepResult[Grown]:
        loop = deps.config.loop
        rounds = state.loop.rounds
        last = rounds[-1] if rounds else JudgeRoundReport(round=0, judged=0, mode=JudgeMode.JUDGE, reason="")
        reason = None
        if last.mode is not JudgeMode.JUDGE:
            reason = f"judge gave no usable verdicts ({last.mode}: {last.reason}); score-based selection"
        elif not last.new_relevant:
            reason = "relevant set did not grow in the last judge round"
        elif len(rounds) >= loop.max_iterations:
            reason = f"max_iterations={loop.max_iterations} reached"
        else:
            reason = budget_reason(deps.need_llm().meter.snapshot(), loop)
        if reason is None:
            new, offered = self._expand(state, deps)
            if new:
                state.candidates = new
                return StepResult(
                    "grew",
                    GrewSummary(
                        iteration=len(rounds),
                        new_candidates=[h.chunk_id for h in new],
                        neighbours=offered,
                        relevant_total=len(state.relevant),
                    ),
                )
            reason = "expansion found no new candidates"
        return self._converge(state, deps, reason)

    def _expand(self, state: RunState, deps: Deps) -> tuple[list[Hit], list[str]]:
        loop = deps.config.loop
        trusted = state.loop.trusted
        keys = evidence_keys(state.first_stage, state.loop.discovered, state.loop.neighbour_of)
        relevant = sorted(state.relevant, key=lambda c: (not trusted.get(c, False), keys.get(c, float("inf"))))
        texts = [state.pool[c].chunk.text for c in relevant[: loop.expand_max_texts] if c in state.pool]
        # ask deep enough that judged chunks cannot crowd out the `expand_k` new ones
        hits = deps.need_retriever().run(state.question, top_k=loop.expand_k + len(state.judged), extra_texts=texts)
        new: list[Hit] = []
        seen: set[str] = set()
        for hit in hits:
            if hit.chunk_id not in state.judged and hit.chunk_id not in seen and len(new) < loop.expand_k:
                new.append(hit)
                seen.add(hit.chunk_id)
        offered: list[str] = []
        if loop.neighbours:
            neighbour_of = state.loop.neighbour_of
            store = deps.need_index().store
            for cid in relevant:
                parent = state.pool.get(cid)
                if parent is None:
                    continue
                rows = store.neighbours(parent.row, radius=1)
                for row, chunk in zip(rows, store.get_many(rows)):
                    if chunk.chunk_id in state.judged or chunk.chunk_id in seen:
                        continue
                    hit = Hit(chunk=chunk, row=row, score=0.0, extra={"neighbour_of_row": float(parent.row)})
                    new.append(hit)
                    seen.add(chunk.chunk_id)
                    offered.append(chunk.chunk_id)
                    if chunk.chunk_id not in keys:
                        neighbour_of[chunk.chunk_id] = cid
        state.remember(new)
        return new, offered

    def _converge(self, state: RunState, deps: Deps, reason: str) -> StepResult[Grown]:
        if order.pending(state):  # the first round's order check had no next round to ride with
            failure = order.settle_alone(state, deps)
            reason = f"{reason}; then the first round's order check: {failure}" if failure else reason
        state.loop.stop_reason = reason
        state.candidates = []
        chosen, summary = converged_context(state, deps)
        state.context = [state.pool[c] for c in chosen if c in state.pool]
        state.loop.selection = summary
        return StepResult(
            "converged",
            {
                "stop": reason,
                "iterations": len(state.loop.rounds),
                "relevant": list(state.relevant),
                "context": chosen,
                **summary,
            },
        )


def converged_context(state: RunState, deps: Deps) -> tuple[list[str], dict]:
    """The context when the loop stops (`loop.combine`, see `ragsieve.agent.judging.combine`).

    A trusted judge: its relevant set, best evidence first, cut by `loop.context_tokens`.
    An untrusted judge (or no verdict at all): the `fast` context; a later conformal
    step adds the conformal set to it. `anchored`: the first release's rule.
    """
    loop = deps.config.loop
    keys = evidence_keys(state.first_stage, state.loop.discovered, state.loop.neighbour_of)
    fast = state.first_stage[: deps.config.retrieval.top_k]
    rule = applied_rule(state, deps)
    if rule is ContextRule.ANCHORED:
        trusted = {} if state.loop.distrusted else state.loop.trusted
        chosen, summary = select_context(
            state.first_stage, keys, trusted, loop.final_k, anchor_k=loop.anchor_k, admit_depth=loop.admit_depth
        )
        return chosen, {"combine": rule.value, **summary}
    if state.loop.distrusted or not state.loop.trusted:
        why = state.loop.distrusted or "no trusted verdict"
        return fast, {
            "combine": rule.value,
            "rule": state.loop.rule_reason,
            "judge": f"untrusted ({why})",
            "source": "fast context",
            "same_as_fast": True,
        }
    # union: the relevant set with the statistical evidence at hand - here the fast context (a later conformal
    # step replaces it with the conformal set); measured: the relevant set alone lost gold with a noisy judge
    # in a plan without the conformal step (SQuAD, 10 % flipped verdicts: 0.977 -> 0.953, issue 23)
    union = rule is ContextRule.UNION
    ids = relevant_set(keys, state.loop.trusted, fast if union else [])
    kept, dropped = fit_budget([state.pool[c] for c in ids if c in state.pool], deps.config.context_budget())
    chosen = [h.chunk_id for h in kept]
    return chosen, {
        "combine": rule.value,
        "rule": state.loop.rule_reason,
        "judge": "trusted",
        "source": "relevant set + fast context" if union else "relevant set",
        "relevant_set": ids,
        "over_budget": [h.chunk_id for h in dropped],
        "context_tokens": deps.config.context_budget(),
        "same_as_fast": chosen == fast,
    }
