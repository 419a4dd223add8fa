"""The deepest location of a cited passage, as one string a client can open or show.

A crawled page's section is its URL with the `#anchor`; a PDF page is `file#page=N` (the PDF open
parameter); a text or code span is `path#L10-L24` (the line fragment code hosts use); anything else is
its source. Every surface (OpenAI annotations, `/v1/ask`, MCP, the documents API) carries this string,
so two passages of one page's different sections are two sources, never one page top.
"""
from __future__ import annotations

import re

_PAGE = re.compile(r"^pp?\. (\d+)")


def page_of(symbol: str) -> int | None:
    """The first page of a PDF locator (`p. 3`, `pp. 2-3`)."""
    match = _PAGE.match(symbol or "")
    return int(match.group(1)) if match else None


def deepest_location(source: str, symbol: str = "", line_start: int | None = None,
                     line_end: int | None = None) -> str:
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
