"""Enterprise formats beside text, HTML and code: PDF, DOCX, Jupyter notebooks, markdown front matter.

Each reader returns the document's text and its *locators*: (character
offset, label) pairs saying where a page, cell or section starts, so a chunk
is cited with the one in force at its first character (`report.pdf (p. 3)`,
`analysis.ipynb (cell 4)`, `page.html#section`). PDF text comes from `pypdf`,
DOCX from `python-docx` (headings become markdown headings, tables rows of
cells); a notebook's markdown cells are kept and its code cells fenced, its
outputs left out (they are results, often huge, rarely the answer).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragsieve.tools.extras import Extra, missing

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


class FormatError(Exception):
    """The file is damaged, encrypted or not what its name says (the loader skips it, named)."""


@dataclass
class Extracted:
    text: str
    title: str = ""
    kind: str = "text"  # text | markdown: how the chunker cuts it
    locators: list[tuple[int, str]] = field(default_factory=list)
    line_start: int | None = None


def read_pdf(path: Path) -> Extracted:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:
        raise missing(Extra.DOCUMENTS, f"reading PDF files ({path.name})", exc.name or "pypdf", "or --exclude '*.pdf'") from None
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise FormatError("encrypted PDF")
        parts, locators, offset = [], [], 0
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            if not text:
                continue
            locators.append((offset, f"p. {number}"))
            parts.append(text)
            offset += len(text) + 2
        title = ""
        meta = reader.metadata
        if meta is not None and meta.title:
            title = str(meta.title)
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise FormatError(f"unreadable PDF ({type(exc).__name__}: {str(exc)[:120]})") from None
    return Extracted(text="\n\n".join(parts), title=title, kind="text", locators=locators)


def read_docx(path: Path) -> Extracted:
    try:
        import docx
    except ImportError as exc:
        raise missing(Extra.DOCUMENTS, f"reading DOCX files ({path.name})", exc.name or "docx", "or --exclude '*.docx'") from None
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises PackageNotFoundError, KeyError, zipfile errors ...
        raise FormatError(f"unreadable DOCX ({type(exc).__name__}: {str(exc)[:120]})") from None
    lines: list[str] = []
    title = (document.core_properties.title or "").strip()
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = Paragraph(block, document)
            text = para.text.strip()
            if not text:
                continue
            style = (para.style.name if para.style is not None else "") or ""
            level = _heading_level(style)
            if level:
                lines += ["", "#" * level + " " + text, ""]
                title = title or (text if level == 1 else "")
            else:
                lines.append(text)
        elif tag == "tbl":
            table = Table(block, document)
            for row in table.rows:
                lines.append(" | ".join(cell.text.strip() for cell in row.cells))
            lines.append("")
    return Extracted(text="\n".join(lines).strip() + "\n", title=title, kind="markdown")


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    m = re.match(r"Heading (\d)", style)
    return min(int(m.group(1)), 6) if m else 0


def read_notebook(raw: str) -> Extracted:
    try:
        data = json.loads(raw)
        cells = data["cells"]
        language = ((data.get("metadata") or {}).get("kernelspec") or {}).get("language") or "python"
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise FormatError(f"not a Jupyter notebook ({type(exc).__name__})") from None
    parts, locators, offset, title = [], [], 0, ""
    for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if not text.strip():
            continue
        if cell.get("cell_type") == "code":
            text = f"```{language}\n{text.rstrip()}\n```"
        elif cell.get("cell_type") == "markdown":
            if not title and (m := re.search(r"^#[ \t]+(.+)$", text, re.MULTILINE)):
                title = m.group(1).strip()
        else:
            continue
        locators.append((offset, f"cell {number}"))
        parts.append(text.strip())
        offset += len(parts[-1]) + 2
    return Extracted(text="\n\n".join(parts), title=title, kind="markdown", locators=locators)


def split_front_matter(text: str) -> tuple[str, str, int]:
    """(title from the front matter or '', text without it, lines removed) for markdown with `---` YAML."""
    m = _FRONT.match(text)
    if not m:
        return "", text, 0
    title = _FRONT_TITLE.search(m.group(1))
    value = title.group(1).strip().strip("'\"") if title else ""
    return value, text[m.end() :], m.group(0).count("\n")
