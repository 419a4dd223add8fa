"""The URLs a crawl has yet to fetch."""

from __future__ import annotations

from collections import deque

from ragsieve.tools.ingest.web_text import is_toc_url


class Frontier:
    """The URLs to fetch, breadth-first; index pages (`is_toc_url`) after all others."""

    def __init__(self, urls: list[str]) -> None:
        self.first: deque[str] = deque(u for u in urls if not is_toc_url(u))
        self.last: deque[str] = deque(u for u in urls if is_toc_url(u))

    def __len__(self) -> int:
        return len(self.first) + len(self.last)

    def append(self, url: str) -> None:
        (self.last if is_toc_url(url) else self.first).append(url)

    def popleft(self) -> str:
        return self.first.popleft() if self.first else self.last.popleft()

    def urls(self) -> list[str]:
        return [*self.first, *self.last]
