"""The reply's sources include the top retrieved passages, whatever the model cited.

A weak model often cites one passage of five, or the wrong one, or abstains; the user then loses the
passage the search ranked first (the issue measured the gold file in the retrieved top 5 for 91 % of
questions but in the cited sources of only 50 % of code answers). So after the answer's own citations, the
context's top `n` passages it did not cite are listed too, as citations with `cited = False`: sources the
reply shows (renderers mark them "retrieved, not cited"), never claims the answer makes. The answer text
is left as the model wrote it (answer metrics and streamed text are unchanged). A passage with the label
of a listed citation is not listed twice.
"""

from __future__ import annotations

from ragsieve.agent.answer.answering import citation_of
from ragsieve.agent.core.state import Citation
from ragsieve.tools.types import Hit

UNCITED = "retrieved, not cited by the answer"  # how renderers mark a `cited = False` source
STOPPED = "The question's budget ran out before an answer was written."  # then the closest passages follow


def with_also_retrieved(text: str, citations: list[Citation], hits_best_first: list[Hit], n: int) -> tuple[str, list[Citation]]:
    """(text, citations) with the top `n` hits not already among the citations appended as further
    sources (`cited = False`), numbered after them; the text is unchanged (n <= 0: both as given)."""
    if n <= 0 or not hits_best_first:
        return text, citations
    seen_ids = {c.chunk_id for c in citations} | {m for c in citations for m in c.merged}
    seen_labels = {c.label() for c in citations}
    added: list[Citation] = []
    for hit in hits_best_first[:n]:
        c = citation_of(len(citations) + len(added) + 1, hit.chunk).model_copy(update={"cited": False, "origin": "retrieved"})
        if c.chunk_id in seen_ids or c.label() in seen_labels:
            continue
        seen_ids.add(c.chunk_id)
        seen_labels.add(c.label())
        added.append(c)
    return text, citations + added
