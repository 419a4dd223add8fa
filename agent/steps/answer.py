"""Answer from the current context (the plan's last word), deciding abstention with evidence."""
from __future__ import annotations

from ragsieve.agent.answering import (NO_EVIDENCE, answer_from_context, answers_and_abstains, is_abstention,
                                      passages_answer)
from ragsieve.agent.plan.runner import Deps, Step, StepResult, register
from ragsieve.agent.plan.state import RunState


def evidence_is_strong(state: RunState) -> bool:
    """A chunk passed the calibrated cutoff, or a trusted judge found a relevant chunk in the context."""
    if state.evidence == "strong":
        return True
    trusted = bool(state.loop.rounds) and not state.loop.distrusted
    return trusted and any(state.loop.trusted.get(h.chunk_id) for h in state.context)


@register
class Answer(Step):
    """Sets `state.answer` and `state.citations` from `state.context` (best first).

    Abstention is decided with evidence, not left to the model alone:
    - an empty context (nothing passed the calibrated cutoff, nothing judged
      relevant) gives `NO_EVIDENCE` without a model call (`abstention = "no_evidence"`);
    - a model that abstains although the evidence is strong gets its reply replaced
      by the most relevant passages with citations, as a search page would
      (`abstention = "passages"`);
    - a reply that both answers and abstains is marked `abstention = "mixed"`
      (the validate step then treats it as unresolved without asking the model).
    When a draft was already written from exactly this context, it is reused.
    """

    name = "answer"

    def run(self, state: RunState, deps: Deps) -> StepResult:
        context_ids = [h.chunk_id for h in state.context]
        state.abstention = None
        if not state.context:
            state.answer, state.citations, state.abstention = NO_EVIDENCE, [], "no_evidence"
            state.citations_inferred = False
            return StepResult("next", {"context": [], "abstention": "no_evidence", "llm": False})
        if state.draft is not None and state.draft_context == context_ids:
            state.answer = state.draft
            state.citations = [c.model_copy() for c in state.draft_citations]
            return StepResult("next", {"reused_draft": True, "context": context_ids,
                                       "cited": [c.chunk_id for c in state.citations]})
        report: dict = {}
        attempt = sum(1 for e in state.trace if e.step == self.name) + 1
        deps.emit("answer", {"attempt": attempt, "context": context_ids})
        options = deps.answer_options
        text, citations = answer_from_context(state.question, state.context, deps,
                                              order=deps.config.loop.context_order, report=report,
                                              instructions=state.instructions, on_token=deps.on_token,
                                              max_tokens=options.get("max_tokens"),
                                              temperature=options.get("temperature"),
                                              asked=state.asked, history=state.history)
        state.citations_inferred = bool(report.get("citations_inferred"))
        state.truncated = report.get("finish_reason") == "length"
        if is_abstention(text) and evidence_is_strong(state):
            text, citations = passages_answer(state.context)
            state.abstention, state.citations_inferred = "passages", False
        elif is_abstention(text):
            state.abstention = "model"
        elif answers_and_abstains(text):
            state.abstention = "mixed"
        state.answer, state.citations = text, citations
        return StepResult("next", {"context": context_ids, "order": deps.config.loop.context_order,
                                   "cited": [c.chunk_id for c in citations], "abstention": state.abstention,
                                   "citations_inferred": state.citations_inferred})
