"""A page's main container as clean markdown, with the anchor of every definition and heading.

Used for pages that have a main container (`<main>`, `role="main"`, `<article>`, Sphinx's `div.body`):
the container is walked once with lxml (iteratively: no recursion limit, linear in the page) and
written as markdown that keeps what a reader and a keyword index need:

- no markdown escapes: `capture_output` stays `capture_output` (a `\\_` splits an identifier in two);
- `<pre>` blocks (code, doctests) become fenced blocks with their line breaks and indentation;
- headings become `#` lines; a definition term with an id (`<dt id>`, Sphinx's API signatures) a line
  of inline code (`` `re.search(pattern, string, flags=0)` ``: no raw `######` in a quoted passage; the
  chunker cuts at its anchor, so chunks start at a signature); other terms lines of their own;
- tables become markdown tables (one row a line, a header separator, `|` in a cell escaped), so a row is
  read as a row and never as lines of lone `|`; a layout table that holds code (Sphinx's line-numbered
  `highlighttable`) gives its code blocks;
- list items start with `- `, and an item with no text leaves no empty bullet;
- permalink marks (`a.headerlink`, the pilcrow) and navigation inside the container are dropped.

Anchors: every `<dt id>` (a definition: `#re.search`, `#functools.lru_cache`), every heading with an id
(its own, its `<section id>`'s when it opens the section, or its permalink's `#fragment`) gives a
locator (offset in the text, `#id`), so a chunk is cited at the definition it sits under.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Element = Any  # an lxml.html element: lxml comes with the optional `crawl` extra and ships no types

SKIPPED = frozenset(
    {
        "script",
        "style",
        "nav",
        "header",
        "footer",
        "aside",
        "noscript",
        "svg",
        "template",
        "iframe",
        "head",
        "button",
        "form",
        "select",
        "textarea",
        "object",
        "canvas",
    }
)
BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "blockquote",
        "figure",
        "figcaption",
        "table",
        "ul",
        "ol",
        "dl",
        "details",
        "summary",
        "fieldset",
        "hr",
        "body",
        "html",
        "dd",
        "center",
        "address",
        "caption",
        "thead",
        "tbody",
        "tfoot",
    }
)
HEADINGS = {f"h{i}": i for i in range(1, 7)}
_MARK = "\ue001"
_MARKER = re.compile(_MARK + r"(\d+)" + _MARK)
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
_BLANKS = re.compile(r"\n{3,}")
_EMPTY_BULLET = re.compile(r"^[ \t]*[-*][ \t]*$")
_PRE_NL = "\ue000"  # a line break inside a fenced block, protected from whitespace clean-up
_PRE_SP = "\ue002"
_SIG_OPEN, _SIG_CLOSE = "\ue003", "\ue004"  # a signature's backticks, set against its text in `_finish`
_SIGNATURE_SPACES = re.compile(_SIG_OPEN + r" ?| ?" + _SIG_CLOSE)


@dataclass
class Markdown:
    text: str
    locators: list[tuple[int, str]] = field(default_factory=list)  # (offset, "#anchor"), sorted


def _classes(el: Element) -> set[str]:
    return set((el.get("class") or "").split())


def _heading_anchor(el: Element) -> str | None:
    if el.get("id"):
        return el.get("id")
    parent = el.getparent()
    if parent is not None and parent.tag in ("section", "div") and parent.get("id"):
        first = next((c for c in parent if isinstance(c.tag, str)), None)
        if first is el or (
            first is not None
            and first.tag not in HEADINGS
            and first.get("id") is None
            and not (first.text_content() or "").strip()
        ):
            return parent.get("id")
    for a in el.iter("a"):
        href = a.get("href") or ""
        if href.startswith("#") and len(href) > 1 and "backref" not in _classes(a):
            return href[1:]
    return None


def _skipped(el: Element) -> bool:
    if el.tag in SKIPPED or el.get("role") in ("navigation", "search", "banner", "contentinfo"):
        return True
    classes = _classes(el)
    return bool(classes & {"headerlink", "sphinxsidebar", "related", "footer", "breadcrumbs"})


def _pre_text(el: Element) -> str:
    return el.text_content().strip("\n").replace("\t", "    ")


def _fenced(pre: Element) -> str:
    code = _pre_text(pre).replace("\n", _PRE_NL).replace(" ", _PRE_SP)
    return f"\n\n```{_PRE_NL}{code}{_PRE_NL}```\n\n"


def _cell(el: Element) -> str:
    """A cell's text on one line: its paragraphs and lines joined by a space, `|` escaped."""
    import lxml.etree as etree

    parts: list[str] = []
    for event, node in etree.iterwalk(el, events=("start", "end")):
        if not isinstance(node.tag, str):
            continue
        if event == "start":
            if node.tag in BLOCKS or node.tag in ("br", "li", "p"):
                parts.append(" ")
            parts.append(node.text or "")
        else:
            if node.tag in BLOCKS or node.tag in ("li", "p"):
                parts.append(" ")
            if node is not el:
                parts.append(node.tail or "")
    return _SPACES.sub(" ", "".join(parts).replace("\u00b6", "")).strip().replace("|", "\\|")


def _table(table: Element) -> str:
    """A table as a markdown table (the first row its header), or the code blocks of a layout table that
    holds code; "" for a table with no text."""
    code = [
        p
        for p in table.iter("pre")
        if "linenos" not in _classes(p) and not any("linenos" in _classes(a) for a in p.iterancestors("td", "div"))
    ]
    if code:
        return "".join(_fenced(p) for p in code)
    rows = []
    for tr in table.iter("tr"):
        if next(tr.iterancestors("table")) is not table:
            continue  # a nested table's row: its text is in the enclosing cell
        cells = [_cell(c) for c in tr if c.tag in ("td", "th")]
        if any(cells):
            rows.append(cells)
    if not rows:
        return "\n\n"
    width = max(len(r) for r in rows)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
    lines.insert(1, "|" + "---|" * width)
    caption = table.find("caption")
    title = [_cell(caption)] if caption is not None and _cell(caption) else []
    body = _PRE_NL.join(title + lines).replace(" ", _PRE_SP)
    return f"\n\n{body}\n\n"


def element_markdown(container: Element) -> Markdown:
    """Markdown of an lxml element (see the module docstring)."""
    import lxml.etree as etree

    parts: list[str] = []
    anchors: list[str] = []
    in_heading = 0

    def mark(anchor: str) -> None:
        parts.append(f"{_MARK}{len(anchors)}{_MARK}")
        anchors.append(anchor)

    walker = etree.iterwalk(container, events=("start", "end"))
    for event, el in walker:
        tag = el.tag if isinstance(el.tag, str) else ""
        if event == "start":
            if not tag or _skipped(el):
                walker.skip_subtree()
                continue
            if tag == "pre":
                parts.append(_fenced(el))
                walker.skip_subtree()
                continue
            if tag == "table":
                parts.append(_table(el))
                walker.skip_subtree()
                continue
            if tag in HEADINGS:
                anchor = _heading_anchor(el)
                parts.append("\n\n")
                if anchor:
                    mark(f"#{anchor}")
                parts.append("#" * HEADINGS[tag] + " ")
                in_heading += 1
            elif tag == "dt":
                parts.append("\n\n")
                if el.get("id"):  # a definition: the chunker cuts at its anchor, so chunks start at its signature
                    mark(f"#{el.get('id')}")
                    parts.append(_SIG_OPEN)
                    in_heading += 1
            elif tag == "li":
                parts.append("\n- ")
            elif tag == "br":
                parts.append("\n")
            elif tag in BLOCKS:
                parts.append("\n\n")
            elif tag in ("code", "tt", "kbd", "samp") and not in_heading and "pre" not in _classes(el):
                parts.append("`")
            if el.text:
                parts.append(el.text.replace("\n", " "))
        else:
            if tag and not _skipped(el) and tag != "pre":
                if tag in HEADINGS:
                    in_heading -= 1
                    parts.append("\n\n")
                elif tag == "dt":
                    in_heading -= 1 if el.get("id") else 0
                    parts.append(_SIG_CLOSE + "\n\n" if el.get("id") else "\n\n")
                elif tag in BLOCKS:
                    parts.append("\n\n")
                elif tag in ("code", "tt", "kbd", "samp") and not in_heading and "pre" not in _classes(el):
                    parts.append("`")
            if el is not container and el.tail:
                parts.append(el.tail.replace("\n", " "))
    return _finish("".join(parts), anchors)


def _finish(raw: str, anchors: list[str]) -> Markdown:
    lines, carried = [], ""
    for line in raw.replace("\u00b6", "").split("\n"):
        line = _SIGNATURE_SPACES.sub("`", _SPACES.sub(" ", line).strip())
        bare = _MARKER.sub("", line)
        if not bare.strip() or _EMPTY_BULLET.match(bare):  # an empty line or bullet goes; its anchors
            carried += "".join(m.group(0) for m in _MARKER.finditer(line))  # move to the next text line
            lines.append("")
            continue
        lines.append(carried + line)
        carried = ""
    text = _BLANKS.sub("\n\n", "\n".join(lines)).strip().replace(_PRE_NL, "\n").replace(_PRE_SP, " ")
    locators: list[tuple[int, str]] = []
    out, last, length = [], 0, 0
    for m in _MARKER.finditer(text):
        out.append(text[last : m.start()])
        length += m.start() - last
        locators.append((length, anchors[int(m.group(1))]))
        last = m.end()
    out.append(text[last:])
    return Markdown("".join(out), _dedupe(locators))


def _dedupe(locators: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """One locator per offset (the innermost, i.e. the last written), sorted."""
    by_offset: dict[int, str] = {}
    for offset, anchor in locators:
        by_offset[offset] = anchor
    return sorted(by_offset.items())
