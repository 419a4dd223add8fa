"""One citation per source label: passages from the same place (`functools.html#functools.lru_cache` three
times, or one code span twice) are cited once, their markers rewritten to that citation's number."""

from __future__ import annotations

import re

from ragsieve.agent.core.state import Citation

_RUN = re.compile(r"(\[\d{1,3}\])(?:\s*\1)+")  # `[1][1]` or `[1] [1]` after the rewrite
_CITE = re.compile(r"\[(\d{1,3})\]")


def merge_same_label(text: str, citations: list[Citation]) -> tuple[str, list[Citation]]:
    """(text, citations) with citations of one label merged into the first (its `merged` lists the other
    chunk ids), numbered 1..n in order, and the text's `[n]` markers rewritten to match."""
    if len({c.label() for c in citations}) == len(citations):
        return text, citations
    first_of: dict[str, Citation] = {}
    renumber: dict[int, int] = {}
    merged: list[Citation] = []
    for c in citations:
        label = c.label()
        if label in first_of:
            keep = first_of[label]
            if c.chunk_id != keep.chunk_id and c.chunk_id not in keep.merged:
                keep.merged.append(c.chunk_id)
            renumber[c.number] = keep.number
            continue
        keep = c.model_copy(update={"number": len(merged) + 1, "merged": list(c.merged)})
        first_of[label] = keep
        renumber[c.number] = keep.number
        merged.append(keep)
    text = _CITE.sub(lambda m: f"[{renumber.get(int(m.group(1)), int(m.group(1)))}]", text)
    return _RUN.sub(r"\1", text), merged
