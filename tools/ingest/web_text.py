"""Main text of a web page as markdown (headings and code blocks kept), with the anchors to cite.

A page with a main container (`<main>`, `role="main"`, `<article>`, Sphinx's `div.body`) is converted
by `html_markdown` (clean text; every definition's and heading's anchor). Any other page goes through
trafilatura (Barbaresi 2021, "Trafilatura: A Web Scraping Library and Command-Line Tool for Text
Discovery and Extraction", ACL demo), which drops navigation, headers, footers, sidebars and cookie
banners; its markdown escapes and empty bullets are removed, and anchors come from the page's headings
(a heading's `id`, its enclosing `<section id>`, or its permalink's `#fragment`). When trafilatura finds
no main text, the plain-text extractor (`html_text`) is the fallback. Tags are first cut to
MAX_ATTRIBUTES attributes (a hostile page's attribute bomb).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragsieve.tools.extras import Extra, require
from ragsieve.tools.ingest.html_markdown import SKIPPED, Element, element_markdown
from ragsieve.tools.ingest.html_text import html_to_text

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SPACE = re.compile(r"\s+")
_PILCROW = "\u00b6"


@dataclass
class PageText:
    title: str
    text: str
    markdown: bool  # True when `text` is markdown (headings as `#` lines)
    anchors: dict[str, str] = field(default_factory=dict)  # normalised heading text -> anchor id
    locators: list[tuple[int, str]] | None = None  # (offset, "#id") of definitions and headings, when known
    toc: bool = False  # a table-of-contents or index page (`is_toc_page`): kept for its links, never a passage


def norm(text: str) -> str:
    return _SPACE.sub(" ", text.replace(_PILCROW, "").replace("`", "").replace("*", "")).strip().lower()


def heading_anchors(html: str, levels: dict[str, int] | None = None) -> dict[str, str]:
    """Normalised heading text -> the anchor a link to that heading uses (`levels` gets each heading's level)."""
    try:
        import lxml.html
    except ImportError:  # pragma: no cover - lxml comes with trafilatura
        return {}
    try:
        root = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return {}
    anchors: dict[str, str] = {}
    for h in root.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        anchor = h.get("id")
        parent = h.getparent()
        if not anchor and parent is not None and parent.tag in ("section", "div") and parent.get("id"):
            anchor = parent.get("id")  # Sphinx: <section id="..."><h2>
        if not anchor:  # a permalink inside the heading (not a back-link to a table of contents)
            links = [a for a in h.iter("a") if (a.get("href") or "").startswith("#")]
            link = next((a for a in links if "headerlink" in (a.get("class") or "")), None) or next(
                (a for a in links if "backref" not in (a.get("class") or "")), None
            )
            anchor = link.get("href")[1:] if link is not None else None
        text = norm(h.text_content())
        if levels is not None and text:
            levels.setdefault(text, int(h.tag[1]))
        if anchor and text and text not in anchors:
            anchors[text] = anchor
    return anchors


def extract_page(html: str) -> PageText:
    """The page's title and main text as markdown: a page with a main container is converted by
    `html_markdown` (definition anchors, fenced code, no escapes); any other page by trafilatura
    (cleaned: `unescape_markdown`, `drop_empty_bullets`), else plain text."""
    html = bound_attributes(html)
    root = _parse(html)
    title = _title(root) if root is not None else None
    container = _main_container(root) if root is not None else None
    toc = is_toc_page(container if container is not None else root) if root is not None else False
    if container is not None:
        got = element_markdown(container)
        if got.text.strip():
            return PageText(title or "", got.text, markdown=True, locators=got.locators, toc=toc)
    trafilatura = require(Extra.CRAWL, "trafilatura", "reading HTML pages", "or --exclude '*.html'")
    text = trafilatura.extract(
        _without_boilerplate_tags(root, html),
        output_format="markdown",
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        favor_recall=True,
        with_metadata=False,
        deduplicate=False,
    )
    if not text or not text.strip():
        plain_title, plain = html_to_text(html)
        return PageText(title or plain_title or "", plain, markdown=False, toc=toc)
    text = drop_empty_bullets(unescape_markdown(text.replace(_PILCROW, "")))  # Sphinx permalink marks
    levels: dict[str, int] = {}
    anchors = heading_anchors(html, levels)
    return PageText(title or "", restore_headings(text, levels), markdown=True, anchors=anchors, toc=toc)


TOC_LINK_SHARE = 0.6  # a page whose text is at least this share link text (and MIN_TOC_LINKS links) is a TOC
MIN_TOC_LINKS = 10
_TOC_CLASSES = {"toctree-wrapper", "genindextable", "modindextable", "indextable", "toc", "table-of-contents"}


_TOC_URL = re.compile(
    r"(?:^|/)(?:genindex(?:-[^/]*)?|py-modindex|modindex|search|contents|sitemap)"
    r"(?:\.html?)?/?$",
    re.I,
)


def is_toc_url(url: str) -> bool:
    """Whether a URL or file path names an index page by its name (Sphinx's `genindex`, `genindex-A`,
    `py-modindex`, `search`, `contents`; a `sitemap` page), query and fragment aside."""
    return _TOC_URL.search(url.split("#", 1)[0].split("?", 1)[0]) is not None


def is_toc_page(element: Element) -> bool:
    """Whether a page's main element is a table of contents or an index rather than text to quote: its
    text is mostly link text (at least TOC_LINK_SHARE of it, over MIN_TOC_LINKS links), or mostly inside
    a Sphinx `toctree`, general index (`genindex`) or module index (`py-modindex`) block."""
    text = _SPACE.sub("", element.text_content())
    if not text:
        return False
    links = [a for a in element.iter("a") if "headerlink" not in (a.get("class") or "")]
    linked = sum(len(_SPACE.sub("", a.text_content())) for a in links)
    if len(links) >= MIN_TOC_LINKS and linked >= TOC_LINK_SHARE * len(text):
        return True
    listed = sum(
        len(_SPACE.sub("", el.text_content()))
        for el in element.iter()
        if isinstance(el.tag, str)
        and set((el.get("class") or "").split()) & _TOC_CLASSES
        and not any(set((a.get("class") or "").split()) & _TOC_CLASSES for a in el.iterancestors())
    )
    return listed >= 0.5 * len(text)


_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>|~=])")
_EMPTY_BULLET = re.compile(r"^[ \t]*[-*+][ \t]*\n", re.MULTILINE)


def unescape_markdown(text: str) -> str:
    """Markdown with its backslash escapes removed (`capture\\_output` -> `capture_output`): the text is read
    by a keyword index and a model, never rendered, and an escape inside an identifier splits it."""
    return _ESCAPED.sub(r"\1", text)


def drop_empty_bullets(text: str) -> str:
    return _EMPTY_BULLET.sub("", text)


MAX_ATTRIBUTES = 256
_LONG_TAG = re.compile(r"<([A-Za-z][\w:-]*)(\s[^<>]{2048,})>")
_ATTRIBUTE = re.compile(r"""[^\s=/>]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?""")


def bound_attributes(html: str) -> str:
    """The page with every tag cut to its first MAX_ATTRIBUTES attributes, in one linear pass: libxml2 and
    trafilatura take quadratic time in a tag's attribute count (a hostile page's tag with 32,000
    attributes cost 73 s of extraction)."""

    def cut(match: re.Match) -> str:
        attrs = _ATTRIBUTE.findall(match.group(2))
        if len(attrs) <= MAX_ATTRIBUTES:
            return match.group(0)
        return f"<{match.group(1)} {' '.join(attrs[:MAX_ATTRIBUTES])}>"

    return _LONG_TAG.sub(cut, html)


def _parse(html: str) -> Element | None:
    require(Extra.CRAWL, "lxml.html", "reading HTML pages", "or --exclude '*.html'")
    import lxml.html

    try:
        return lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return None


def _without_boilerplate_tags(root: Element, html: str) -> str:
    """The page without script/style/nav/header/footer/aside/noscript/... elements (their tails kept):
    trafilatura keeps some of them (`<noscript>`) on short pages."""
    if root is None:
        return html
    import lxml.html

    for el in list(root.iter(*(SKIPPED - {"head"}))):
        if el.getparent() is not None:
            el.drop_tree()
    return lxml.html.tostring(root, encoding="unicode")


def _title(root: Element) -> str | None:
    found = root.find(".//title")
    if found is None:
        return None
    return _SPACE.sub(" ", found.text_content() or "").strip() or None


def _main_container(root: Element) -> Element | None:
    for xpath in _MAIN_XPATH:
        found = root.xpath(xpath)
        if found:
            return found[0]
    return None


_MAIN_XPATH = (
    "//main",
    "//*[@role='main']",
    "//article",
    "//div[contains(concat(' ', @class, ' '), ' body ')]",
    "//div[@id='content']",
)


def restore_headings(text: str, levels: dict[str, int]) -> str:
    """Mark as markdown headings the lines that are the page's headings but came out as plain lines
    (trafilatura's fallback extractor drops the markup on short pages)."""
    out = []
    in_fence = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        key = norm(line)
        if not in_fence and key in levels and not line.lstrip().startswith("#"):
            line = "#" * levels[key] + " " + line.strip()
        out.append(line)
    return "\n".join(out)


def heading_locators(text: str, anchors: dict[str, str]) -> list[tuple[int, str]]:
    """(offset, `#anchor`) of every markdown heading of `text` whose anchor the page gives."""
    return [(m.start(), f"#{anchors[norm(m.group(2))]}") for m in _HEADING.finditer(text) if norm(m.group(2)) in anchors]


def page_locators(page: PageText) -> list[tuple[int, str]]:
    """The page's citation anchors: definitions and headings when the converter saw them, else headings."""
    return page.locators if page.locators is not None else heading_locators(page.text, page.anchors)
