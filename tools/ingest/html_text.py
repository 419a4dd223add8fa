"""Readable text from HTML with the stdlib parser: boilerplate dropped, blocks on their own lines."""

from __future__ import annotations

import re
from html.parser import HTMLParser

SKIPPED_TAGS = frozenset({"script", "style", "nav", "header", "footer", "aside", "noscript", "svg", "template", "iframe", "head"})
PARAGRAPH_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "blockquote",
        "table",
        "ul",
        "ol",
        "dl",
        "figure",
        "figcaption",
        "form",
        "fieldset",
        "details",
        "summary",
        "hr",
        "body",
        "html",
    }
)
LINE_TAGS = frozenset({"li", "tr", "br", "dt", "dd", "caption", "option"})
CELL_TAGS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
_BLANKS = re.compile(r"\n{3,}")
_PRE_NEWLINE = "\ue000"  # protects <pre> line breaks and indentation from line stripping


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.skip_stack: list[str] = []
        self.in_title = False
        self.pre_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self.skip_stack in ([], ["head"]) and not self.title_parts:
            self.in_title = True
        elif tag in SKIPPED_TAGS:
            self.skip_stack.append(tag)
        elif self.skip_stack:
            return
        elif tag in PARAGRAPH_TAGS:
            self.parts.append("\n\n")
            if tag == "pre":
                self.pre_depth += 1
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in LINE_TAGS:
            self.parts.append("\n")
        elif tag in CELL_TAGS:
            self.parts.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_TAGS:
            return  # a self-closed <svg/> has no content to skip
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in SKIPPED_TAGS:
            if tag in self.skip_stack:
                while self.skip_stack and self.skip_stack.pop() != tag:
                    pass
        elif self.skip_stack:
            return
        elif tag in PARAGRAPH_TAGS:
            self.parts.append("\n\n")
            if tag == "pre" and self.pre_depth:
                self.pre_depth -= 1

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
        elif self.skip_stack:
            return
        elif self.pre_depth:
            self.parts.append(data.replace("\n", _PRE_NEWLINE))
        else:
            self.parts.append(_SPACES.sub(" ", data))


def html_to_text(html: str) -> tuple[str | None, str]:
    """Return (title or None, visible text) of an HTML page.

    Drops script/style/nav/header/footer/aside/noscript/svg (and the rest of
    `<head>`); paragraph-like blocks are separated by a blank line, list items
    and rows start a new line; whitespace is collapsed outside `<pre>`.
    """
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    title = _SPACES.sub(" ", "".join(parser.title_parts)).strip() or None
    raw = "".join(parser.parts)
    text = "\n".join(line.strip() for line in raw.split("\n"))
    text = _BLANKS.sub("\n\n", text).replace(_PRE_NEWLINE, "\n").strip("\n")
    return title, text
