"""Validate the latest answer (or draft): a structured verdict `{resolved, reason}` from `validate.j2`.

`resolved` always describes the text the plan returns: in the shipped plans the
answer step runs before validate, so the final answer is what is validated."""

from __future__ import annotations

import logging
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from ragsieve.agent.answer.answering import answers_and_abstains, is_abstention
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps, Step, StepResult, Target
from ragsieve.agent.errors import LLMError

log = logging.getLogger(__name__)


class Verdict(BaseModel):
    resolved: bool
    reason: str = ""


Checked = Literal["resolved", "unresolved", "exhausted"]  # exhausted: unresolved after the fallback


class CheckedEdges(TypedDict):
    resolved: Target
    unresolved: Target
    exhausted: Target


class Validate(Step[Checked, CheckedEdges]):
    """`resolved`, `unresolved` (the sparse fallback has not run yet) or `exhausted` (it has).

    Documented defaults, recorded in the trace as `default`: no draft (the
    draft call failed) and a validator failure (malformed JSON after the
    re-ask, refusal, endpoint error after retries) count as *unresolved*:
    when in doubt, consult the sparse chunks, which happens at most once.
    An abstaining text, one that both answers and abstains (a deterministic check),
    and an answer the answer step marked as an abstention are unresolved without
    asking the model.
    """

    name = "validate"

    def run(self, state: RunState, deps: Deps) -> StepResult[Checked]:
        summary: dict = {}
        text, citations, what = _latest(state)
        summary["validated"] = what
        if text is None:
            resolved, reason = False, f"no {what} to validate"
            summary["default"] = "unresolved"
        elif what == "answer" and state.abstention is not None:
            resolved, reason = False, f"deterministic: the answer abstains ({state.abstention})"
        elif is_abstention(text) or answers_and_abstains(text):
            resolved, reason = False, f"deterministic: the {what} abstains"
        else:
            passages = _passages(state, citations, deps.config.loop.validate_extra)
            prompt = deps.prompts.render("validate", question=state.question, draft=text, passages=passages)
            try:
                verdict = deps.need_llm().structured([{"role": "user", "content": prompt}], Verdict, max_tokens=256)
                resolved, reason = verdict.resolved, verdict.reason
            except LLMError as exc:
                log.warning("validation failed (%s): %s", type(exc).__name__, exc)
                resolved, reason = False, f"validator failed: {type(exc).__name__}: {str(exc)[:300]}"
                summary["default"] = "unresolved"
        state.resolved = resolved
        outcome: Checked = "resolved" if resolved else "exhausted" if state.fallback_used else "unresolved"
        summary.update({"resolved": resolved, "reason": reason[:500], "fallback_used": state.fallback_used})
        return StepResult(outcome, summary)


def _latest(state: RunState) -> tuple[str | None, list[Any], str]:
    """What to validate: the answer when the plan has written one, else the draft."""
    if state.answer is not None:
        return state.answer, state.citations, "answer"
    return state.draft, state.draft_citations, "draft"


def _passages(state: RunState, citations: list[Any], extra: int) -> list[dict]:
    """The cited chunks numbered as the text cites them, then the context's best `extra` others (`loop.validate_extra`;
    issue 56: the validator checks the answer against its evidence, so it need not read the whole context again: on
    SciFact that prompt was as long as the answer's)."""
    by_id = {h.chunk_id: h for h in state.context}
    cited = list(dict.fromkeys(c.chunk_id for c in sorted(citations, key=lambda c: c.number) if c.chunk_id in by_id))
    rest = [h.chunk_id for h in state.context if h.chunk_id not in cited][:extra]
    return [{"number": i, "text": by_id[cid].chunk.text} for i, cid in enumerate(cited + rest, start=1)]
