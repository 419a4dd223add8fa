"""The final answer, from `state.context`, with numbered citations."""
from __future__ import annotations

from ragsieve.agent.answering import answer_from_context
from ragsieve.agent.plan.runner import Deps, Step, StepResult, register
from ragsieve.agent.plan.state import RunState


@register
class Answer(Step):
    """Answers from the context in the configured order (`loop.context_order`).

    When the plan drafted an answer from this very context, the draft is
    reused (resolved or not: the same prompt at temperature 0 would only
    repeat it) rather than paying for a second call.
    LLM transport errors propagate: the caller reports them.
    """

    name = "answer"

    def run(self, state: RunState, deps: Deps) -> StepResult:
        context_ids = [h.chunk_id for h in state.context]
        if state.draft is not None and state.draft_context == context_ids:
            state.answer = state.draft
            state.citations = [c.model_copy() for c in state.draft_citations]
            return StepResult("next", {"reused_draft": True, "context": context_ids,
                                       "cited": [c.chunk_id for c in state.citations]})
        report: dict = {}
        text, citations = answer_from_context(state.question, state.context, deps,
                                              order=deps.config.loop.context_order, report=report)
        state.answer, state.citations = text, citations
        state.citations_inferred = bool(report.get("citations_inferred"))
        return StepResult("next", {"context": context_ids, "order": deps.config.loop.context_order,
                                   "cited": [c.chunk_id for c in citations],
                                   "citations_inferred": state.citations_inferred})
