"""One hit per section of a page, and no table-of-contents page among the hits.

A documentation page is chunked at its headings and definitions, and a long section becomes several
chunks that all cite the same `URL#anchor`; a top 3 spent on three chunks of one anchor shows the reader
one passage three times (issue 44: Sphinx pages). `one_per_section` keeps only the best-ranked chunk of
each (document, `#anchor`) section, as `stitch.one_per_definition` does for the pieces of a split code
definition. A chunk of a table-of-contents or index page (`kind == "toc"`, marked at ingest by
`web_text.is_toc_page`) is never a passage: it is dropped unless the search asks for that kind.
"""

from __future__ import annotations

from ragsieve.tools.types import Hit

TOC_KIND = "toc"


def section_key(hit: Hit) -> tuple[str, str] | None:
    """(document, `#anchor`) of a prose chunk cited at an anchor; None for code and unanchored chunks."""
    chunk = hit.chunk
    if chunk.kind == "code" or not chunk.symbol.startswith("#"):
        return None
    return chunk.doc_id, chunk.symbol


def one_per_section(
    hits: list[Hit], seen: set[tuple[str, str]] | None = None, sections: bool = True, keep_toc: bool = False
) -> list[Hit]:
    """`hits` (order and fields kept) without table-of-contents chunks (unless `keep_toc`) and, with
    `sections`, without a later chunk of a section already in the list; `seen` carries the sections of
    earlier parts of the same list (updated)."""
    seen = set() if seen is None else seen
    out: list[Hit] = []
    for hit in hits:
        if hit.chunk.kind == TOC_KIND and not keep_toc:
            continue
        key = section_key(hit) if sections else None
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(hit)
    return out
