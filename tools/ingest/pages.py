"""Web pages (crawled, or HTML files in a folder) as `Document`s: main text, kind, anchors, titles."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ragsieve.tools.ingest.web_text import PageText, extract_page, is_toc_url, page_locators
from ragsieve.tools.types import Document

if TYPE_CHECKING:
    from ragsieve.tools.ingest.crawl.report import CrawledPage


def page_document(url: str, html: str, content_hash: str) -> Document | None:
    """A crawled page as a Document: its main text (markdown, headings kept), cited by URL + #anchor."""
    page = extract_page(html)
    if not page.text.strip():
        return None
    return Document(
        doc_id=url,
        source=url,
        title=page.title or url,
        text=page.text,
        kind="toc" if is_toc_url(url) else page_kind(page),
        content_hash=content_hash,
        line_start=None,
        locators=page_locators(page),
    )


def page_kind(page: PageText) -> str:
    """`toc` for a table-of-contents or index page (indexed for `read`, never ranked as a passage), else
    `markdown` when the text is markdown, else `html`."""
    return "toc" if page.toc else "markdown" if page.markdown else "html"


def site_documents(pages: Iterable[CrawledPage]) -> list[Document]:
    """A crawl's pages as Documents (`page_document`), the site-wide title part dropped from their titles."""
    docs = [d for d in (page_document(p.url, p.html, p.content_hash) for p in pages) if d is not None]
    strip_site_titles(docs)
    return docs


def strip_site_titles(docs: list[Document]) -> None:
    """Drop the part of the titles that every page of the site shares (`Guide - MySite`)."""
    from ragsieve.tools.ingest.site_titles import strip_site_affixes

    for doc, title in zip(docs, strip_site_affixes([d.title for d in docs])):
        doc.title = title
