"""Split Documents into contiguous, non-overlapping chunks under a token budget.

A document is cut into small *units* that tile its text exactly (lines; for
prose, over-long lines further cut at sentence ends, then at token starts).
Units are packed greedily; when a chunk is full it ends at the best boundary
inside its last two thirds: for prose a markdown heading, then a paragraph
break, then a line break; for code a top-level definition, then a blank
line; else as late as possible. Chunk texts are
the packed spans with surrounding blank space trimmed, so concatenating them
gives back the document modulo whitespace at the cuts. Code is cut at line
ends only, except a line over the budget (minified JavaScript, a data blob),
which is cut at token starts like prose. Every chunk is at most `chunk_tokens`
tokens and `chunk_tokens * MAX_CHARS_PER_TOKEN` characters, whatever the input:
a run of characters with no token boundary is cut by length.

Markdown keeps its blocks whole: a fenced code block or a table (a run of `|`
lines) that fits the budget is one unit, so it is never cut. A longer code
block is cut between its lines (preferably at blank lines, never just before
its closing fence), and each piece is re-opened (`` ``` `` before it) and
closed (after it) so that every chunk has balanced fences; a document with
such a block is packed `FENCE_RESERVE` tokens under the budget to leave room.
Those added fences are the only text of a chunk that is not in the document.
"""

from __future__ import annotations

import bisect
import re

from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.ingest.syntax import CodeSpan, available, cast_spans, language_of
from ragsieve.tools.ingest.units import FENCE, MAX_CHARS_PER_TOKEN, UNIT_MAKERS, Unit, bounded, count_tokens, lines
from ragsieve.tools.types import Chunk, Document

_LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")
MIN_FILL = 1 / 3  # a full chunk ends at the best boundary inside its last two thirds


def pack(tokens: list[int], scores: list[int], budget: int) -> list[tuple[int, int]]:
    """Greedy packing of units into [i, j) ranges of at most `budget` tokens.

    A full range ends before the highest-scoring unit whose cut leaves the
    range at least `MIN_FILL` full (the latest on ties); a single unit over
    the budget stands alone.
    """
    prefix = [0]
    for t in tokens:
        prefix.append(prefix[-1] + t)
    ranges, start, n = [], 0, len(tokens)
    while start < n:
        end = max(start + 1, bisect.bisect_right(prefix, prefix[start] + budget, lo=start) - 1)
        if end >= n:
            ranges.append((start, n))
            break
        best, best_score = end, scores[end]
        floor = prefix[start] + budget * MIN_FILL
        for cut in range(end - 1, start, -1):
            if prefix[cut] < floor:
                break
            if scores[cut] > best_score:
                best, best_score = cut, scores[cut]
        ranges.append((start, best))
        start = best
    return ranges


_MARKDOWN_KINDS = frozenset({"markdown", "toc"})
FENCE_RESERVE = 8  # tokens (and 16x characters) kept free in a document whose code block must be cut: ``` twice


def _long_fenced_block(text: str, fences: list[int], budget: int) -> bool:
    """Whether a fenced block of `text` (fence line starts `fences`) is over `budget` tokens."""
    return any(
        count_tokens(text[a:b]) > budget or b - a > budget * MAX_CHARS_PER_TOKEN
        for a, b in zip(fences[::2], fences[1::2] + [len(text)])
    )


def _balanced_fences(body: str, fences: list[int], start: int, end: int) -> str:
    """A chunk's text with a code block cut at its start re-opened and one cut at its end closed, so every
    chunk has balanced fences (`fences`: the document's fence line starts; [start, end) the chunk's span)."""
    before = bisect.bisect_left(fences, start)
    within = bisect.bisect_left(fences, end) - before
    opened_at_start = before % 2 == 1
    if opened_at_start:
        body = "```\n" + body
    if (before + within) % 2 == 1:
        body = body + "\n```"
    return body


def locator_for(locators: list[tuple[int, str]], first: int, end: int) -> str:
    """The locator in force at a chunk's first character; pages as a range when the chunk crosses
    pages (`pp. 2-3`); when another section starts within the chunk's first third, that one."""
    offsets = [o for o, _ in locators]
    at = bisect.bisect_right(offsets, first)
    label = locators[at - 1][1] if at else ""
    if label.startswith("p. "):
        last = locators[bisect.bisect_left(offsets, end) - 1][1]
        return label if last == label else f"pp. {label[3:]}-{last[3:]}"
    limit = first + (end - first) / 3
    while at < len(locators) and locators[at][0] <= limit:
        label = locators[at][1]
        at += 1
    return label


def anchor_sections(units: list[Unit], weights: list[int], locators: list[tuple[int, str]], budget: int) -> list[tuple[int, int]]:
    """[a, b) unit ranges cut at every `#anchor` locator (a web page's definitions and headings), so a
    chunk never runs across two definitions and cites the one it holds; a section that is only its
    heading (`## Functions` right above a definition) joins the next. One range when the document has
    no anchors."""
    offsets = {o for o, label in locators if label.startswith("#")}
    cuts = [i for i, u in enumerate(units) if i and u[0] in offsets]
    if not cuts:
        return [(0, len(units))]
    bounds = [0] + cuts + [len(units)]
    ranges: list[tuple[int, int]] = []
    start = 0
    for end in bounds[1:]:
        if end < len(units) and not any(units[i][2] for i in range(start + 1, end)):
            continue  # a heading alone: carried into the next section
        ranges.append((start, end))
        start = end
    return ranges


class Chunker:
    """Cut a Document into `Chunk`s of at most `chunk_tokens` tokens (see `count_tokens`).

    `syntax=True` cuts source code with a tree-sitter grammar on syntax (cAST,
    `ragsieve.tools.ingest.syntax`) and records each chunk's enclosing symbols;
    code without a grammar, and every other kind, is cut by the line packer."""

    def __init__(self, chunk_tokens: int = 200, syntax: bool = True) -> None:
        if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
            raise UsageError(f"chunk_tokens must be a positive integer, got {chunk_tokens!r}")
        self.chunk_tokens = chunk_tokens
        self.syntax = syntax

    def run(self, doc: Document) -> list[Chunk]:
        """The document's chunks in order, `chunk_index` 0..n-1; [] for a blank document."""
        if self.syntax and doc.kind == "code":
            language = language_of(doc.source)
            if language is not None:
                require(
                    Extra.CODE, "tree_sitter_language_pack", "cutting code by its syntax tree", "or --no-syntax: cut by lines"
                )
            if available(language):
                return self._by_syntax(doc, cast_spans(doc.text, language, self.chunk_tokens))
        return self._by_lines(doc)

    def _by_syntax(self, doc: Document, spans: list[CodeSpan]) -> list[Chunk]:
        """Each cAST span is one chunk, or several by the line packer when a leaf is over the budget."""
        lines = doc.text.splitlines(keepends=True)
        chunks: list[Chunk] = []
        first = doc.line_start if doc.line_start is not None else 1
        for span in spans:
            piece = "".join(lines[span.start_line : span.end_line + 1])
            part = doc.model_copy(update={"text": piece, "line_start": first + span.start_line})
            for chunk in self._by_lines(part):
                chunks.append(chunk.model_copy(update={"chunk_index": len(chunks), "symbol": span.symbol()}))
        return chunks

    def _by_lines(self, doc: Document) -> list[Chunk]:
        text = doc.text
        fences = [start for start, end in lines(text) if FENCE.match(text, start)] if doc.kind in _MARKDOWN_KINDS else []
        budget = self.chunk_tokens
        if fences and _long_fenced_block(text, fences, budget):  # room to re-open and close a cut block
            budget = max(1, budget - FENCE_RESERVE)
        units = bounded(text, UNIT_MAKERS.get(doc.kind, UNIT_MAKERS["text"])(text, budget), budget)
        weights = [max(u[2], -(-(u[1] - u[0]) // MAX_CHARS_PER_TOKEN)) for u in units]  # tokens or chars/16
        scores = [u[3] for u in units]
        ranges: list[tuple[int, int]] = []
        for a, b in anchor_sections(units, weights, doc.locators, budget):
            ranges.extend((a + i, a + j) for i, j in pack(weights[a:b], scores[a:b], budget))
        newlines = [m.start() for m in re.finditer("\n", text)] if doc.line_start is not None else []
        chunks: list[Chunk] = []
        for i, j in ranges:
            start, end = units[i][0], units[j - 1][1]
            piece = text[start:end]
            if doc.kind == "code":
                body = _LEADING_BLANK_LINES.sub("", piece).rstrip()
            else:
                body = piece.strip()
            if not body:
                continue
            if fences:
                body = _balanced_fences(body, fences, start, end)
            line_start = line_end = None
            if doc.line_start is not None:
                first = start + len(piece) - len(piece.lstrip())
                last = start + len(piece.rstrip()) - 1
                line_start = doc.line_start + bisect.bisect_left(newlines, first)
                line_end = doc.line_start + bisect.bisect_left(newlines, last)
            symbol = ""
            if doc.locators:  # a page, cell or section: see `locator_for`
                symbol = locator_for(doc.locators, start + len(piece) - len(piece.lstrip()), end)
            chunks.append(
                Chunk(
                    doc_id=doc.doc_id,
                    chunk_index=len(chunks),
                    text=body,
                    source=doc.source,
                    title=doc.title,
                    kind=doc.kind,
                    line_start=line_start,
                    line_end=line_end,
                    symbol=symbol,
                )
            )
        return chunks
