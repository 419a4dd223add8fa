"""Main text of an HTML page as Markdown, with each heading's anchor, via trafilatura.

trafilatura (Barbaresi 2021, ACL demo) drops navigation, headers, footers,
sidebars and cookie banners — including Sphinx's `div role="navigation"` and
`div class="footer"`, which a tag-name filter misses — and keeps headings
(`# ...`), lists, tables and code blocks. Its output has no element ids, so
the anchors come from a second, cheap pass over the original HTML: every
`h1`..`h6` with its own `id`, else the `#...` of a permalink inside it
(Sphinx's `headerlink`; not its `toc-backref` links back to the contents),
else the `id` of the innermost element around it (`<section id=...>`). Markdown headings are matched to those in
order by their normalised text. The result's `sections` give, for each
heading line, its character offset, anchor and text: the chunker cuts at
headings and cites `page.html#anchor`.
"""
from __future__ import annotations

import logging
import re
from html.parser import HTMLParser

log = logging.getLogger(__name__)

_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_VOID = frozenset({"br", "img", "hr", "input", "meta", "link", "area", "base", "col", "embed", "source",
                   "track", "wbr", "param"})
_MARKS = re.compile(r"[\u00b6#\uf0c1]+")  # pilcrow and link glyphs of permalinks
_EMPHASIS = re.compile(r"[`*_]")
_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
LOOKAHEAD = 25  # headings of the HTML skipped at most to match one Markdown heading


def normalise(text: str) -> str:
    """Heading text for matching: permalink glyphs and Markdown emphasis/code marks removed, spaces folded."""
    return " ".join(_EMPHASIS.sub("", _MARKS.sub(" ", text)).split()).casefold()


class _Headings(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str | None] = []  # the open elements' ids
        self.tags: list[str] = []
        self.found: list[tuple[str, str | None]] = []  # (normalised text, anchor)
        self.title_parts: list[str] = []
        self._in_title = False
        self._heading: tuple[list[str], str | None, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "title" and not self.title_parts:
            self._in_title = True
        if tag in _HEADINGS and self._heading is None:
            around = next((i for i in reversed(self.ids) if i), None)
            self._heading = ([], attrs.get("id"), around)
        elif tag == "a" and self._heading is not None and (href := attrs.get("href") or "").startswith("#") \
                and "backref" not in (attrs.get("class") or "") and attrs.get("role") != "doc-backlink":
            parts, own, around = self._heading
            self._heading = (parts, own or href[1:], around)
        if tag not in _VOID:
            self.tags.append(tag)
            self.ids.append(attrs.get("id"))

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag in _HEADINGS and self._heading is not None:
            parts, own, around = self._heading
            self.found.append((normalise("".join(parts)), own or around))
            self._heading = None
        if tag in self.tags:
            while self.tags:
                self.ids.pop()
                if self.tags.pop() == tag:
                    break

    def handle_data(self, data):
        if self._in_title:
            self.title_parts.append(data)
        if self._heading is not None:
            self._heading[0].append(data)


def heading_anchors(html: str) -> tuple[str, list[tuple[str, str | None]]]:
    """(page title, [(normalised heading text, anchor or None)]) in document order."""
    parser = _Headings()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.title_parts).split()), parser.found


def extract_main(html: str) -> tuple[str, str, list[tuple[int, str, str]]] | None:
    """(title, Markdown main text, [(char offset of a heading line, anchor or '', heading text)]), or None
    when trafilatura is missing or finds no main text (the caller falls back to all page text)."""
    try:
        import trafilatura
    except ImportError:
        log.debug("trafilatura not installed: HTML keeps all page text (pip install 'ragsieve[sources]')")
        return None
    text = trafilatura.extract(html, output_format="markdown", include_formatting=True, include_tables=True,
                               include_comments=False, include_links=False, favor_recall=True)
    if not text or not text.strip():
        return None
    text = text.replace("\u00b6", "")  # permalink pilcrows after headings and definition terms
    title, headings = heading_anchors(html)
    lines, sections, offset, pointer, in_fence = [], [], 0, 0, False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _MD_HEADING.match(line)
        if m:
            shown = " ".join(_MARKS.sub(" ", m.group(2)).split())
            line = f"{m.group(1)} {shown}"
            key = normalise(shown)
            anchor = ""
            for k in range(pointer, min(len(headings), pointer + LOOKAHEAD)):
                if headings[k][0] == key:
                    pointer, anchor = k + 1, headings[k][1] or ""
                    break
            sections.append((offset, anchor, shown))
        lines.append(line)
        offset += len(line) + 1
    if not title:
        title = next((h for _, _, h in sections), "")
    return title, "\n".join(lines), sections
