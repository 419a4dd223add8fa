"""Whether an answer is grounded in the documents: does its text cite a passage it lists as cited?

A weak model may answer from its own knowledge and cite nothing; the reply then
looks like any other (sources listed, "retrieved, not cited"). Every response
carries `grounding` (and `grounded`), so a page can say so plainly, and under
`abstention.strict` such an answer is replaced by the abstention with the
closest passages (`steps/answer.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragsieve.agent.core.state import Citation

_MARKER = re.compile(r"\[(\d{1,3})\]")
ABSTENTIONS = frozenset({"no_evidence", "model", "passages", "ungrounded"})  # `abstention` values with no answer
NOT_GROUNDED_NOTE = "Not grounded in the documents: the answer cites none of the passages."


class Grounding(str, Enum):
    CITED = "cited"  # the model's own markers point at listed passages
    INFERRED = "inferred"  # the model cited nothing; passages sharing most of its words are listed for it
    NONE = "none"  # the text cites no passage: not grounded in the documents
    ABSTAINED = "abstained"  # no answer was given (an abstention, quoted passages, a stop): nothing to ground


def markers_in(text: str) -> set[int]:
    """The `[n]` numbers the text contains."""
    return {int(m.group(1)) for m in _MARKER.finditer(text)}


def cited_in_text(text: str, citations: Sequence[Citation]) -> list[Citation]:
    """The citations marked as cited whose `[n]` the text contains (the trace counts only these)."""
    present = markers_in(text)
    return [c for c in citations if c.cited and c.number in present]


def grounding_of(text: str, citations: Sequence[Citation], *, abstained: bool, inferred: bool) -> Grounding:
    """`inferred`: the model cited nothing and ragsieve chose the citations (`origin` "inferred", no marker in
    the text); else the text's own markers decide."""
    if abstained:
        return Grounding.ABSTAINED
    if inferred and any(c.cited and c.origin == "inferred" for c in citations):
        return Grounding.INFERRED
    if not cited_in_text(text, citations):
        return Grounding.NONE
    return Grounding.CITED
