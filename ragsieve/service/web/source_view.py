"""The source view: a cited document as the index holds it, the cited lines (or chunk) highlighted.

Built from the index's own chunks (never from the file system), escaped as
text, served without script. Code and text files show numbered lines with
`#L<n>` anchors; PDFs and other line-less documents show their chunks under
page headings with `#page-<n>` anchors; the cited part has `id="cited"`.
"""

from __future__ import annotations

from html import escape

from ragsieve.service.web.links import page_of

MAX_CHUNKS = 5000
MAX_CHARS = 5_000_000


def render(index: str, chunks: list, cited_index: int) -> str:
    chunks = chunks[:MAX_CHUNKS]
    if not chunks:
        return _page("not found", "<p>This document is no longer in the index.</p>")
    title = chunks[0].title or chunks[0].source
    cited = next((c for c in chunks if c.chunk_index == cited_index), None)
    body, size = [], 0
    numbered = all(c.line_start is not None for c in chunks)
    seen_pages: set[int] = set()
    next_line = None
    for c in chunks:
        size += len(c.text)
        if size > MAX_CHARS:
            body.append('<p class="gap">(the rest of this document is not shown: it is too long)</p>')
            break
        is_cited = c is cited
        if numbered:
            if next_line is not None and c.line_start > next_line:
                body.append('<div class="gap">⋯</div>')
            lines = c.text.split("\n")
            rows = []
            for offset, line in enumerate(lines):
                n = c.line_start + offset
                hl = is_cited and (c.line_end is None or n <= c.line_end)
                rows.append(
                    f'<span class="line{" hl" if hl else ""}" id="L{n}"><a class="n" href="#L{n}">{n}</a>'
                    f'<span class="t">{escape(line) or " "}</span></span>'
                )
            next_line = c.line_start + len(lines)
            body.append(f'<pre class="code"{" id=cited" if is_cited else ""}>' + "".join(rows) + "</pre>")
        else:
            page = page_of(c.symbol)
            if page is not None and page not in seen_pages:
                seen_pages.add(page)
                body.append(f'<h2 id="page-{page}">Page {page}</h2>')
            elif c.symbol and not c.symbol.startswith(("p. ", "pp. ")):
                body.append(f"<h2>{escape(c.symbol)}</h2>")
            body.append(f'<div class="chunk{" hl" if is_cited else ""}"{" id=cited" if is_cited else ""}>{escape(c.text)}</div>')
    head = (
        f'<header><h1>{escape(title)}</h1><p class="meta">{escape(chunks[0].source)} · index '
        f"<code>{escape(index)}</code>"
        + (
            f" · cited: {escape(cited.symbol or '')} lines {cited.line_start}–{cited.line_end}"
            if cited and cited.line_start
            else ""
        )
        + "</p></header>"
    )
    return _page(title, head + "<main>" + "".join(body) + "</main>")


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{escape(title)} · ragsieve source</title><link rel="stylesheet" href="/ui/static/source.css">'
        f"</head><body>{body}</body></html>"
    )
