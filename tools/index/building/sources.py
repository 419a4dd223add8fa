"""What a build reads: files and folders (loaded here, or on a Ray cluster by the loader it is given) and
websites (crawled politely, each page a document cited by its URL), checked for a usable, duplicate-free set."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ragsieve.tools import tracing
from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.index.building.report import build_scopes
from ragsieve.tools.ingest.crawl.crawler import Crawler
from ragsieve.tools.ingest.loaders import LoadResult
from ragsieve.tools.ingest.pages import site_documents
from ragsieve.tools.ingest.walk import LoadStats
from ragsieve.tools.types import Document

if TYPE_CHECKING:
    from ragsieve.tools.ingest.selection import Selection


@dataclass
class Gathered:
    """The documents of a build, their load statistics, the scopes they cover, and one report per website."""

    documents: list[Document]
    loaded: LoadResult
    scopes: list[str]
    crawl_reports: list[Any] = field(default_factory=list)


def crawler_for(root: Path, url: str, options: dict) -> Crawler:
    """A crawler of `url` whose resumable state lives under `<index>/crawl/`."""
    require(Extra.CRAWL, "trafilatura", f"indexing a website ({url})")
    state_dir = root / "crawl" / hashlib.sha1(url.encode()).hexdigest()[:12]
    return Crawler(url, state_dir=state_dir, **options)


@tracing.traced("ragsieve.build.load")  # a build phase's span (docs/tracing.md)
def gather(
    paths: Sequence[str | Path],
    load: Callable[..., LoadResult],
    root: Path,
    *,
    base: Path | None,
    progress: bool,
    selection: Selection | None = None,
    base_url: str | None = None,
    crawl: dict | None = None,
) -> Gathered:
    """Load the files and folders of `paths` with `load` and crawl its http(s) URLs; nothing to index, or two
    documents with one id, is refused."""
    urls = [str(p) for p in paths if str(p).startswith(("http://", "https://"))]
    files = [p for p in paths if str(p) not in urls]
    if files:
        loaded = load(files, progress=progress, selection=selection, base=base, base_url=base_url)
    else:
        loaded = LoadResult(documents=[], stats=LoadStats())
    docs = list(loaded.documents)
    web_scopes, reports = [], []
    for url in urls:
        crawler = crawler_for(root, url, crawl or {})
        report = crawler.run()
        reports.append(report)
        web_scopes.append(crawler.scope)
        docs.extend(site_documents(report.pages))  # the site-wide title suffix dropped
        loaded.stats.skipped.extend((u, f"crawl: {why}") for u, why in report.skipped)
    if not docs:
        first = loaded.stats.problems()[:1]  # e.g. the only file needs an extra: say which, and how to add it
        why = "".join(f" ({path}: {reason})" for path, reason in first)
        raise UsageError(f"nothing to index in {[str(p) for p in files]}: {loaded.stats.summary()}{why}")
    ids = [d.doc_id for d in docs]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise UsageError(f"duplicate document ids: {dup}")
    return Gathered(docs, loaded, build_scopes(files, base) + web_scopes, reports)
