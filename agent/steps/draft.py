"""Draft an answer from the selected context (validated next)."""

from __future__ import annotations

import logging

from ragsieve.agent.answer.answering import answer_from_context
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import DraftSummary
from ragsieve.agent.errors import LLMError

log = logging.getLogger(__name__)


class Draft(Step[Next]):
    """Sets `state.draft`, `draft_citations` and `draft_context` from `state.context`.

    An LLM failure leaves `state.draft = None` (recorded in the trace); the
    validate step then treats the draft as unresolved.
    """

    name = "draft"

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        ids = [h.chunk_id for h in state.context]
        try:
            text, citations = answer_from_context(
                state.question,
                state.context,
                deps,
                order=deps.config.loop.context_order,
                report={},
                asked=state.asked,
                history=state.history,
            )
        except LLMError as exc:
            log.warning("draft failed (%s): %s", type(exc).__name__, exc)
            state.draft, state.draft_citations, state.draft_context = None, [], ids
            return StepResult("next", DraftSummary(context=ids, error=f"{type(exc).__name__}: {str(exc)[:300]}"))
        state.draft, state.draft_citations, state.draft_context = text, citations, ids
        state.resolved = None
        return StepResult(
            "next",
            DraftSummary(
                context=ids, chars=len(text), cited=[c.chunk_id for c in citations], fallback_context=state.fallback_used
            ),
        )
