"""A website as an index source: crawl, turn pages into Documents, build, remember the crawl.

The crawl's memory lives beside the index in `<index>/crawl/<site>.json`
(ETag, Last-Modified and body hash per page, written after a successful
build) and, while a crawl runs, `<index>/crawl/<site>.pending/` (pages and
frontier; deleted after the build), so an interrupted crawl resumes and a
re-crawl fetches only what changed. Pages are documents whose id is their
canonical URL; chunks cite `URL#anchor`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ragsieve.tools.ingest.crawl import Crawler, CrawlResult, Page
from ragsieve.tools.ingest.html_main import extract_main
from ragsieve.tools.ingest.html_text import html_to_text
from ragsieve.tools.types import Document


def page_document(page: Page) -> Document | None:
    """The page's main text as a Document (None when it has no text)."""
    main = extract_main(page.html)
    if main is not None:
        title, text, sections = main
    else:
        (title, text), sections = html_to_text(page.html), []
    if not text.strip():
        return None
    return Document(doc_id=page.url, source=page.url, title=title or page.url, text=text, kind="html",
                    content_hash=page.hash, line_start=None, sections=sections)


def _chunking_changed(builder) -> bool:
    from ragsieve.tools.errors import IndexMissingError
    from ragsieve.tools.index.hybrid import current_generation, read_manifest

    try:
        gen = current_generation(Path(builder.root))
        return gen is None or read_manifest(gen)["settings"]["chunking"] != builder._settings()["chunking"]
    except (IndexMissingError, OSError, KeyError, ValueError):
        return True


def site_key(crawler: Crawler) -> str:
    return hashlib.sha1(crawler.scope.encode("utf-8")).hexdigest()[:16]


def crawl_and_index(builder, start_url: str, **crawler_options) -> tuple[CrawlResult, object | None]:
    """Crawl `start_url` into `builder`'s index: (crawl result, build report or None when nothing changed)."""
    folder = Path(builder.root) / "crawl"
    probe = Crawler(start_url, **{k: v for k, v in crawler_options.items() if k == "same_domain"})
    key = site_key(probe)
    state_file, pending = folder / f"{key}.json", folder / f"{key}.pending"
    known = json.loads(state_file.read_text(encoding="utf-8"))["pages"] if state_file.is_file() else {}
    if known and _chunking_changed(builder):
        known = {}  # every page is fetched again and re-chunked with the new settings
    crawler = Crawler(start_url, pending_dir=pending, **crawler_options)
    result = crawler.run(known)
    docs = [d for d in (page_document(p) for p in result.pages) if d is not None]
    result.skipped.extend((p.url, "no text") for p in result.pages if p.url not in {d.doc_id for d in docs})
    report = None
    if docs or result.gone:
        report = builder.build([], documents=docs, remove=result.gone or None)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"start_url": start_url, "scope": crawler.scope, "pages": result.state(known)}),
                   encoding="utf-8")
    os.replace(tmp, state_file)
    shutil.rmtree(pending, ignore_errors=True)
    return result, report
