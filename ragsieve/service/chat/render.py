"""How an answer is shown to a chat client: numbered markdown references and an extension field.

`content` ends with the references a plain chat UI renders:

    ...rotated keys stay valid for 24 hours [1].

    **Sources**
    [1] docs/api-keys.md:10-24 (Rotating keys)

and the same citations, structured, are in the response's `ragsieve` field
(`citations`: number, label, location, source, lines, chunk id), with the question
actually searched (after a conversation rewrite), the plan and the trace.
The Vercel AI SDK drops unknown fields but keeps OpenAI `annotations` of type `url_citation`
(streamed: on the delta that carries the sources), whose `url` is the citation's deepest location
(`#anchor`, `#page=N`, `#L10-L24`); the `[n]` marker is the annotation's title prefix. LangChain's
`ChatOpenAI` keeps neither: the **Sources** list in `content` is what reaches it.
"""

from __future__ import annotations

import re
from typing import Any

from ragsieve.agent.answer.also_retrieved import UNCITED
from ragsieve.agent.answer.grounding import NOT_GROUNDED_NOTE, Grounding

# characters that would make markdown of a file name or title: `__init__.py` bold, `[x]` a link; an
# underscore inside a word (`lumen_client`) makes no emphasis and is left as it is
_MARKDOWN = re.compile(r"[\\`*\[\]<>]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def markdown_text(text: str) -> str:
    """`text` escaped so that markdown shows it as it is (`\\_\\_init\\_\\_.py` renders `__init__.py`)."""
    return _MARKDOWN.sub(lambda m: "\\" + m.group(0), text)


INFERRED_HEADING = "Sources (not cited by the model)"  # citations ragsieve inferred: no [n] in the model's text
INFERRED_MARK = "suggested by ragsieve"


def references(answer) -> str:
    note = f"\n\n*{NOT_GROUNDED_NOTE}*" if answer.grounding == Grounding.NONE else ""
    if not answer.citations:
        return note
    heading = f"**{INFERRED_HEADING}**" if answer.grounding == Grounding.INFERRED else "**Sources**"
    lines = [note, "", heading] if note else ["", "", heading]
    for c in answer.citations:
        title = f" ({markdown_text(c.title)})" if c.title else ""
        mark = f" *({UNCITED})*" if not c.cited else f" *({INFERRED_MARK})*" if c.origin == "inferred" else ""
        lines.append(f"[{c.number}] {markdown_text(c.label())}{title}{mark}  ")
    return "\n".join(lines)


def extension(answer, *, ignored: list[str] | None = None, first_token_s: float | None = None) -> dict[str, Any]:
    data = {
        "index_question": answer.question,
        "asked": answer.asked,
        "plan": answer.plan,
        "citations": [c.public() for c in answer.citations],
        "resolved": answer.resolved,
        "abstention": answer.abstention,
        "grounding": answer.grounding.value,
        "grounded": answer.grounded,
        "stopped": answer.stopped,
        "trace": [{"step": e.step, "outcome": e.outcome, "duration_s": e.duration_s} for e in answer.trace],
    }
    if ignored:
        data["ignored_fields"] = ignored
    if first_token_s is not None:
        data["time_to_first_token_s"] = round(first_token_s, 4)
    return data


def usage(answer) -> dict[str, int]:
    u = answer.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def finish_reason(answer) -> str:
    """OpenAI's `finish_reason`: "length" when max_tokens cut the answer, else "stop"."""
    return "length" if getattr(answer, "truncated", False) else "stop"


def url_annotations(answer) -> list[dict[str, Any]]:
    """The citations as OpenAI `url_citation` annotations (indices point into the message content); `url` is
    the deepest location (`#anchor`, `#page=N`, `#L10-L24`), so each citation is its own source. Only passages
    the answer cites: a passage listed as retrieved and not cited (`also_retrieved`) or under an abstention stays
    in the content's Sources list, marked so, and is not made to look like a citation."""
    out = []
    for c in answer.citations:
        marker = f"[{c.number}]"
        start = answer.answer.find(marker)
        if not c.cited or start < 0:
            continue
        out.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": c.location(),
                    "title": f"{marker} {c.label()}" + (f" ({c.title})" if c.title else ""),
                    "start_index": max(start, 0),
                    "end_index": max(start, 0) + (len(marker) if start >= 0 else 0),
                },
            }
        )
    return out
