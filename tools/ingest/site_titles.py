"""The site-wide part of page titles (" — Python 3.11.2 documentation", " | Acme Docs"), found from the site.

A suffix (or prefix) is site-wide when the same separated part ends (or starts) the titles of at least
half of a crawl's pages, and of at least 3 of them: it names the site, not the page, so it is dropped
from every title that carries it (a title is never emptied). Nothing is hard-coded for one generator.
"""

from __future__ import annotations

import re
from collections import Counter

_SEPARATORS = (" \u2014 ", " \u2013 ", " | ", " - ", " \u00b7 ", " :: ", " \u00bb ", " : ")
MIN_PAGES = 3


def _ends(title: str) -> tuple[list[str], list[str]]:
    """Candidate suffixes and prefixes of a title: each cut at a separator."""
    suffixes, prefixes = [], []
    for sep in _SEPARATORS:
        start = 0
        while (at := title.find(sep, start)) != -1:
            if at > 0:
                suffixes.append(title[at:])
            if at + len(sep) < len(title):
                prefixes.append(title[: at + len(sep)])
            start = at + 1
    return suffixes, prefixes


def site_affixes(titles: list[str]) -> tuple[str | None, str | None]:
    """(site-wide suffix, site-wide prefix) of the titles, each None when there is none."""
    titles = [t for t in titles if t]
    need = max(MIN_PAGES, (len(titles) + 1) // 2)
    suffix_count: Counter[str] = Counter()
    prefix_count: Counter[str] = Counter()
    for title in titles:
        suffixes, prefixes = _ends(title)
        suffix_count.update(set(suffixes))
        prefix_count.update(set(prefixes))

    def best(counts: Counter) -> str | None:
        common = [(n, len(a), a) for a, n in counts.items() if n >= need]
        return max(common)[2] if common else None  # the most shared, then the longest

    return best(suffix_count), best(prefix_count)


def strip_site_affixes(titles: list[str]) -> list[str]:
    suffix, prefix = site_affixes(titles)
    out = []
    for title in titles:
        new = title
        if suffix and new.endswith(suffix) and len(new) > len(suffix):
            new = new[: -len(suffix)]
        if prefix and new.startswith(prefix) and len(new) > len(prefix):
            new = new[len(prefix) :]
        out.append(re.sub(r"\s+", " ", new).strip() or title)
    return out
