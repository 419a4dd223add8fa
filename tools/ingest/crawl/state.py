"""The crawler's state folder: `crawl-state.json` (frontier, seen, done, validators) and the pages it fetched.

Every write is atomic (a temporary file, then `os.replace`): a killed crawl resumes from the last state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class CrawlState:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "crawl-state.json"

    def load(self) -> dict:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def save(self, state: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(tmp, self.path)

    def store(self, digest: str, html: str) -> None:
        """Keep a page's HTML under its content hash (once)."""
        folder = self.folder / "pages"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{digest}.html"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(html, encoding="utf-8", errors="surrogatepass")
            os.replace(tmp, path)

    def cached(self, digest: str) -> str | None:
        try:
            return (self.folder / "pages" / f"{digest}.html").read_text(encoding="utf-8")
        except OSError:
            return None
