"""URL rules of the crawler: canonical form, scope, links and sitemaps of a page.

A URL is de-duplicated on its canonical form: scheme and host lower-cased,
default port and fragment dropped, tracking parameters (`utm_*`, `gclid`,
`fbclid`, ...) removed and the remaining query sorted. A page's
`<link rel="canonical">` (same host) names the page it duplicates.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

TRACKING = re.compile(r"^(utm_\w+|gclid|fbclid|msclkid|mc_cid|mc_eid|_ga|_hsenc|_hsmi|ref_src)$", re.I)
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_SITEMAP_URLS = 50_000  # the sitemaps.org limit per file


def is_url(text: str) -> bool:
    return str(text).lower().startswith(("http://", "https://"))


def canonical_url(url: str) -> str:
    """The de-duplication key of `url` (see module doc)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                             if not TRACKING.match(k)))
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def scope_of(start_url: str, same_domain: bool) -> str:
    """The prefix every crawled URL must start with: the start page's folder, or its whole site."""
    start = canonical_url(start_url)
    parts = urlsplit(start)
    if same_domain:
        return urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    folder = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
    return urlunsplit((parts.scheme, parts.netloc, folder, "", ""))


def in_scope(url: str, scope: str) -> bool:
    return canonical_url(url).startswith(scope)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.canonical: str | None = None
        self.base: str | None = None
        self.nofollow = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href") and "nofollow" not in (a.get("rel") or ""):
            self.links.append(a["href"])
        elif tag == "link" and "canonical" in (a.get("rel") or "").lower().split() and a.get("href"):
            self.canonical = a["href"]
        elif tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "meta" and (a.get("name") or "").lower() == "robots" and "nofollow" in (a.get("content") or ""):
            self.nofollow = True


def page_links(html: str, page_url: str) -> tuple[list[str], str | None]:
    """(absolute http(s) links to follow, canonical URL or None) of one page."""
    parser = _Links()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser may raise on pathological input; keep what was read
        pass
    base = urljoin(page_url, parser.base) if parser.base else page_url
    links = [] if parser.nofollow else [urljoin(base, h.strip()) for h in parser.links]
    canonical = urljoin(page_url, parser.canonical) if parser.canonical else None
    return [u for u in links if is_url(u)], canonical


def sitemap_urls(xml_text: str, sitemap_url: str) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of a sitemap or sitemap index; ([], []) when not XML."""
    try:
        root = ET.fromstring(xml_text.encode("utf-8") if isinstance(xml_text, str) else xml_text)
    except ET.ParseError:
        return [], []
    local = root.tag.rsplit("}", 1)[-1]
    locs = [urljoin(sitemap_url, (el.text or "").strip()) for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "loc"
            and (el.text or "").strip()][:MAX_SITEMAP_URLS]
    return ([], locs) if local == "sitemapindex" else (locs, [])
