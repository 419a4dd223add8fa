"""The deepest location of a cited passage, as one string a client can open or show.

A crawled page's section is its URL with the `#anchor`; a PDF page is `file#page=N` (the PDF open
parameter); a text or code span is `path#L10-L24` (the line fragment code hosts use); anything else is
its source. Every surface (OpenAI annotations, `/v1/ask`, MCP, the documents API) carries this string,
so two passages of one page's different sections are two sources, never one page top.

A list of hits (`ragsieve search`, MCP `search`) names each passage by its `label` (source, lines, symbol)
and shows a one-line `snippet` of its text.
"""

from __future__ import annotations

import re

from ragsieve.tools.types import Chunk

_PAGE = re.compile(r"^pp?\. (\d+)")
SNIPPET_CHARS = 240


def page_of(symbol: str) -> int | None:
    """The first page of a PDF locator (`p. 3`, `pp. 2-3`)."""
    match = _PAGE.match(symbol or "")
    return int(match.group(1)) if match else None


def deepest_location(source: str, symbol: str = "", line_start: int | None = None, line_end: int | None = None) -> str:
    """`source` with the most precise fragment known: `#anchor`, `#page=N` or `#L<start>-L<end>`."""
    base = source.split("#", 1)[0] if symbol.startswith("#") else source
    if symbol.startswith("#"):
        return base + symbol
    page = page_of(symbol)
    if page is not None:
        return f"{source}#page={page}"
    if line_start is not None:
        end = f"-L{line_end}" if line_end and line_end != line_start else ""
        return f"{source}#L{line_start}{end}"
    return source


def label(chunk: Chunk) -> str:
    """`source:10-24 (symbol)`, or `url#anchor` for a page section: how a hit is named in a list."""
    where = chunk.source
    if chunk.line_start is not None:
        where += f":{chunk.line_start}" + (f"-{chunk.line_end}" if chunk.line_end and chunk.line_end != chunk.line_start else "")
    if chunk.symbol.startswith("#"):
        return f"{chunk.source}{chunk.symbol}"
    return f"{where} ({chunk.symbol})" if chunk.symbol else where


def snippet(text: str) -> str:
    """The text on one line, cut at a word within `SNIPPET_CHARS`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " ..."
