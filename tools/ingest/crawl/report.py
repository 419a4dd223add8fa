"""What a crawl returns: its pages and its counts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CrawledPage:
    url: str
    html: str
    content_hash: str
    changed: bool  # new or different since the last crawl


@dataclass
class CrawlReport:
    pages: list[CrawledPage] = field(default_factory=list)
    fetched: int = 0
    not_modified: int = 0
    reused_by_lastmod: int = 0  # not requested: the sitemap's lastmod says unchanged
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (url, why)
    seconds: float = 0.0

    def summary(self) -> str:
        changed = sum(1 for p in self.pages if p.changed)
        return (
            f"crawled {len(self.pages)} pages ({changed} new or changed, {self.not_modified} not modified, "
            f"{self.reused_by_lastmod} unchanged by sitemap lastmod; {self.fetched} downloaded) "
            f"in {self.seconds:.1f}s; skipped {len(self.skipped)}"
        )
