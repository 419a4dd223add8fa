"""Enterprise formats beside text, HTML and code: PDF, DOCX, Jupyter notebooks, Markdown front matter.

Each reader turns a file's bytes (or text) into `Extracted`: a title, text
the chunker understands (Markdown headings where the format has them) and
`sections` that become citation anchors: PDF pages cite `file.pdf#page=N`
(the PDF open parameter browsers honour), notebook cells `nb.ipynb#cell=N`.
pypdf and python-docx are imported when a file needs them; without them the
file is skipped with the extra to install.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field

from ragsieve.tools.errors import UsageError

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.M)
MAX_PDF_PAGES = 5000


class FormatError(UsageError):
    """A file of a supported format that cannot be read (damaged, encrypted, or its reader missing)."""


@dataclass
class Extracted:
    title: str | None
    text: str
    sections: list[tuple[int, str, str]] = field(default_factory=list)
    line_start: int | None = None


def read_pdf(raw: bytes) -> Extracted:
    """Text per page with pypdf; each page is a section `page=N`."""
    try:
        from pypdf import PdfReader
    except ImportError:
        raise FormatError("PDF needs pypdf: pip install 'ragsieve[sources]'") from None
    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted:
            raise FormatError("encrypted PDF")
        parts, sections, offset = [], [], 0
        for number, page in enumerate(reader.pages[:MAX_PDF_PAGES], start=1):
            text = (page.extract_text() or "").strip()
            if not text:
                continue
            sections.append((offset, f"page={number}", ""))
            parts.append(text)
            offset += len(text) + 2
        title = (reader.metadata.title if reader.metadata else None) or None
    except FormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on damaged files
        raise FormatError(f"damaged PDF: {type(exc).__name__}: {exc}") from None
    return Extracted(title=str(title).strip() if title else None, text="\n\n".join(parts), sections=sections)


def read_docx(raw: bytes) -> Extracted:
    """Paragraphs with headings as Markdown `#`, tables as `a | b` rows, in document order."""
    try:
        import docx
    except ImportError:
        raise FormatError("DOCX needs python-docx: pip install 'ragsieve[sources]'") from None
    try:
        document = docx.Document(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - zip/xml errors of a damaged file
        raise FormatError(f"damaged DOCX: {type(exc).__name__}: {exc}") from None
    lines: list[str] = []
    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = docx.text.paragraph.Paragraph(child, document)
            text = para.text.strip()
            if not text:
                continue
            style = (para.style.name if para.style is not None else "") or ""
            level = int(style.split()[-1]) if style.startswith("Heading") and style.split()[-1].isdigit() else 0
            lines.append(f"{'#' * min(level, 6)} {text}" if level else ("# " + text if style == "Title" else text))
        elif tag == "tbl":
            table = docx.table.Table(child, document)
            for row in table.rows:
                lines.append(" | ".join(cell.text.strip() for cell in row.cells))
        lines.append("")
    title = document.core_properties.title or None
    return Extracted(title=title, text="\n".join(lines).strip())


def read_notebook(text: str) -> Extracted:
    """Markdown cells as Markdown, code cells fenced with the kernel's language; each cell `cell=N`."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        language = (nb.get("metadata", {}).get("kernelspec", {}) or {}).get("language") or \
            (nb.get("metadata", {}).get("language_info", {}) or {}).get("name") or ""
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FormatError(f"not a Jupyter notebook (nbformat 4 JSON): {exc}") from None
    parts, sections, offset, title = [], [], 0, None
    for number, cell in enumerate(cells, start=1):
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        source = "".join(source) if isinstance(source, list) else str(source)
        if not source.strip():
            continue
        kind = cell.get("cell_type")
        if kind == "code":
            source = f"```{language}\n{source.rstrip()}\n```"
        elif kind == "markdown" and title is None and (m := re.search(r"^#[ \t]+(.+)$", source, re.M)):
            title = m.group(1).strip()
        sections.append((offset, f"cell={number}", ""))
        parts.append(source.strip("\n"))
        offset += len(parts[-1]) + 2
    return Extracted(title=title, text="\n\n".join(parts), sections=sections)


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """(front-matter title or None, text without the front matter, 1-based line of the remaining text)."""
    m = _FRONT.match(text)
    if not m:
        return None, text, 1
    title = _FRONT_TITLE.search(m.group(1))
    value = title.group(1).strip().strip("\"'") if title else None
    return value or None, text[m.end():], m.group(0).count("\n") + 1
