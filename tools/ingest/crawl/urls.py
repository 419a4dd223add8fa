"""The crawler's reading of URLs and pages: the URL a page is known by, its links, its canonical, a sitemap's entries.

De-duplication: fragments and tracking parameters (`utm_*`, `gclid`, `fbclid`, ...) dropped, query sorted,
default ports removed; a page's `<link rel="canonical">` names it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urldefrag, urlencode, urljoin, urlsplit, urlunsplit

TRACKING = re.compile(r"^(utm_\w+|gclid|fbclid|mc_cid|mc_eid|_hsenc|_hsmi|ref_src)$", re.I)
_HREF = re.compile(r"""<a\s[^>]*?href\s*=\s*["']([^"'#][^"']*|#[^"']*)["']""", re.I)
_CANONICAL = re.compile(r"""<link\s[^>]*rel\s*=\s*["']canonical["'][^>]*>""", re.I)
_HREF_ATTR = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.I)
_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>(?:(?:(?!</url>|<loc>).){0,400}?<lastmod>\s*([^<\s]+)\s*</lastmod>)?", re.I | re.S)


def normalise(url: str) -> str:
    """The URL a page is known by: no fragment, no tracking parameters, sorted query, no default port."""
    url, _ = urldefrag(url.strip())
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port and not ((parts.scheme == "http" and port == 80) or (parts.scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not TRACKING.match(k)))
    return urlunsplit((parts.scheme.lower(), host, parts.path or "/", query, ""))


def page_links(base: str, html: str) -> list[str]:
    """The http(s) links of a page, normalised, in order of first appearance."""
    out = []
    for href in _HREF.findall(html):
        if href.startswith(("#", "mailto:", "javascript:", "tel:")):
            continue
        link = normalise(urljoin(base, href))
        if link.startswith(("http://", "https://")) and link not in out:
            out.append(link)
    return out


def canonical_url(base: str, html: str) -> str | None:
    """The page's `<link rel="canonical">`, normalised, or None."""
    tag = _CANONICAL.search(html)
    href = _HREF_ATTR.search(tag.group(0)) if tag else None
    return normalise(urljoin(base, href.group(1))) if href else None


def sitemap_entries(xml: str) -> list[tuple[str, str]]:
    """(`<loc>`, `<lastmod>` or "") for each entry of a sitemap or a sitemap index."""
    return _LOC.findall(xml)
