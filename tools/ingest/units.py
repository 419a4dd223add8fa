"""The units a document is cut into, and the token count they are measured in.

A document is tiled exactly by small *units* (start, end, tokens, boundary
score before it): lines; for prose, over-long lines further cut at sentence
ends, then at token starts; a markdown code block or table that fits the
budget merged into one unit; for code, lines scored by top-level definitions
and blank lines. `ragsieve.tools.ingest.chunking` packs them into chunks.
Every unit is at most `budget` tokens and `budget * MAX_CHARS_PER_TOKEN`
characters once `bounded`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+")
_MD_HEADING = re.compile(r"#{1,6}[ \t]")
FENCE = re.compile(r"[ \t]*(```|~~~)")
_CODE_DEF = re.compile(
    r"(?:(?:export|public|private|protected|internal|static|async|pub|abstract|final|default)\s+)*"
    r"(?:def|class|function|func|fn|interface|struct|enum|impl|trait|module|object|type|const|let|var)\b"
)

# Boundary preferences; higher wins. A unit's score is that of the cut before it.
NONE, LINE, PARAGRAPH, SECTION = 0, 1, 2, 3
MAX_CHARS_PER_TOKEN = 16  # character bound per budgeted token (a 200-token chunk holds <= 3,200 chars)

Unit = tuple[int, int, int, int]  # (start char, end char, tokens, boundary score before it)


def count_tokens(text: str) -> int:
    """Number of `\\w+|[^\\w\\s]` tokens: words plus single punctuation marks.

    An approximation of subword-tokenizer counts (words of ordinary prose are
    mostly one subword token; rare words and code run higher), cheap and
    additive across cuts at whitespace or token starts.
    """
    return len(_TOKEN.findall(text))


def lines(text: str) -> list[tuple[int, int]]:
    """(start, end) char spans of each line, newline included; they tile `text`."""
    spans, start = [], 0
    for m in re.finditer("\n", text):
        spans.append((start, m.end()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _cut_long(text: str, start: int, end: int, budget: int, score: int) -> list[Unit]:
    """Cut one over-long line at sentence ends, then sentences at every `budget`-th token start."""
    cuts = [start] + [m.end() for m in _SENTENCE_END.finditer(text, start, end) if start < m.end() < end] + [end]
    units: list[Unit] = []
    for a, b in zip(cuts, cuts[1:]):
        tokens = len(_TOKEN.findall(text, a, b))
        if tokens <= budget:
            units.append((a, b, tokens, score if a == start else NONE))
            continue
        starts = [m.start() for m in _TOKEN.finditer(text, a, b)]
        bounds = [a] + starts[budget::budget] + [b]
        for x, y in zip(bounds, bounds[1:]):
            units.append((x, y, len(_TOKEN.findall(text, x, y)), score if x == start else NONE))
    return units


def bounded(text: str, units: list[Unit], budget: int) -> list[Unit]:
    """Units cut until none exceeds `budget` tokens or `budget * MAX_CHARS_PER_TOKEN` characters."""
    max_chars = budget * MAX_CHARS_PER_TOKEN
    out: list[Unit] = []
    for unit in units:
        start, end, tokens, score = unit
        if tokens <= budget and end - start <= max_chars:
            out.append(unit)
            continue
        pieces = _cut_long(text, start, end, budget, score) if tokens > budget else [unit]
        for a, b, t, sc in pieces:
            if b - a <= max_chars and t <= budget:
                out.append((a, b, t, sc))
                continue
            for x in range(a, b, max_chars):
                y = min(b, x + max_chars)
                out.append((x, y, len(_TOKEN.findall(text, x, y)), sc if x == a else NONE))
    return out


def _prose_units(text: str, budget: int, markdown: bool) -> list[Unit]:
    units: list[Unit] = []
    previous_blank, in_fence, after_block = True, False, False
    for start, end in lines(text):
        line = text[start:end]
        blank = not line.strip()
        heading = markdown and not in_fence and _MD_HEADING.match(line) is not None
        fence = markdown and FENCE.match(line) is not None
        if fence:
            in_fence = not in_fence
        score = SECTION if heading else PARAGRAPH if previous_blank or after_block or (fence and in_fence) else LINE
        if markdown and (in_fence or fence) and not (fence and in_fence):
            # inside a code block that must be cut: at its blank lines, never before its closing fence
            score = PARAGRAPH if blank and not fence else NONE
        previous_blank, after_block = blank, fence and not in_fence
        tokens = count_tokens(line)
        if tokens > budget:
            units.extend(_cut_long(text, start, end, budget, score))
        else:
            units.append((start, end, tokens, score))
    return _whole_blocks(text, units, budget) if markdown else units


def _blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the fenced code blocks and tables (runs of `|` lines) of markdown."""
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    table: int | None = None
    last_end = 0
    for start, end in lines(text):
        line = text[start:end]
        if FENCE.match(line):
            if opened is None:
                opened = start
            else:
                spans.append((opened, end))
                opened = None
        elif opened is None:
            is_row = line.lstrip().startswith("|")
            if is_row and table is None:
                table = start
            elif not is_row and table is not None:
                spans.append((table, last_end))
                table = None
        last_end = end
    if table is not None:
        spans.append((table, last_end))
    return sorted(spans)


def _whole_blocks(text: str, units: list[Unit], budget: int) -> list[Unit]:
    """`units` with each code block or table that fits the budget merged into one unit (so a chunk holds
    it whole); a longer block keeps its line units and is cut between lines (`Chunker` re-opens fences)."""
    blocks = [(a, b) for a, b in _blocks(text)]
    if not blocks:
        return units
    out: list[Unit] = []
    i = 0
    for a, b in blocks:
        while i < len(units) and units[i][0] < a:
            out.append(units[i])
            i += 1
        j = i
        while j < len(units) and units[j][1] <= b:
            j += 1
        inside = units[i:j]
        tokens = sum(u[2] for u in inside)
        if inside and tokens <= budget and inside[-1][1] - inside[0][0] <= budget * MAX_CHARS_PER_TOKEN:
            out.append((inside[0][0], inside[-1][1], tokens, inside[0][3]))
        else:
            out.extend(inside)
        i = j
    out.extend(units[i:])
    return out


def _code_units(text: str) -> list[Unit]:
    units: list[Unit] = []
    previous_blank, previous_decorator = True, False
    for start, end in lines(text):
        line = text[start:end]
        blank = not line.strip()
        top_level = not blank and not line[0].isspace()
        definition = top_level and (_CODE_DEF.match(line) is not None or line.startswith("@"))
        if definition and not previous_decorator:
            score = SECTION
        elif previous_blank and not previous_decorator:
            score = PARAGRAPH
        else:
            score = NONE
        units.append((start, end, count_tokens(line), score))
        if not blank:
            previous_decorator = top_level and line.startswith("@")
        previous_blank = blank
    return units


UNIT_MAKERS: dict[str, Callable[[str, int], list[Unit]]] = {
    "code": lambda text, budget: _code_units(text),
    "markdown": lambda text, budget: _prose_units(text, budget, markdown=True),
    "toc": lambda text, budget: _prose_units(text, budget, markdown=True),  # a table-of-contents page
    "text": lambda text, budget: _prose_units(text, budget, markdown=False),
}  # html and beir text is prose without markdown headings
