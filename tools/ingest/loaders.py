"""Turn files, folders and BEIR corpora into `Document`s, counting everything skipped.

Which files are read is decided in `ragsieve.tools.ingest.walk` (and
`selection`). A file's `doc_id` (and `source`) is the indexed folder's name
and the path below it in posix form (`examples/docs/api-keys.md`), whatever
the working directory, so re-indexing the same tree from anywhere gives the
same ids.
"""
from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import logging
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragsieve.tools.access.front_matter import front_matter_access
from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.formats import FormatError, read_docx, read_notebook, read_pdf, split_front_matter
from ragsieve.tools.ingest.walk import LoadStats, collect_files, display_path
from ragsieve.tools.ingest.web_text import PageText, extract_page, is_toc_url, page_locators
from ragsieve.tools.types import Document

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt": "text", ".rst": "text", ".md": "markdown", ".markdown": "markdown",
                 ".html": "html", ".htm": "html", ".ipynb": "notebook", ".pdf": "pdf", ".docx": "docx"}
CODE_SUFFIXES = frozenset(
    ".py .js .ts .tsx .jsx .java .go .rs .c .h .cpp .hpp .cs .rb .php .sh .sql .kt .swift .scala"
    " .yaml .yml .toml".split()
)
BEIR_KEYS = ("_id", "title", "text")
_SNIFF_BYTES = 8192
MAX_FILE_BYTES = 64 * 1024 * 1024  # a text or code file larger than this is skipped, named (BEIR corpora stream)
_MD_TITLE = re.compile(r"^#[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class LoadResult:
    documents: list[Document]
    stats: LoadStats


def kind_of(path: Path) -> str | None:
    """What the folder walk reads `path` as (its loader's kind), or None for a file it skips."""
    name = path.name.lower()
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        return "beir"
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return TEXT_SUFFIXES[suffix]
    return "code" if suffix in CODE_SUFFIXES else None


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def sniff_encoding(raw: bytes) -> tuple[str | None, int]:
    """(encoding, BOM length) from a byte-order mark, or UTF-16 recognised by its NUL pattern.

    BOM-less UTF-16 text in a Latin script has a NUL in every other byte; when
    at least 90% of the even (or odd) bytes of the sample are NUL and almost
    none of the others are, it is UTF-16-BE (or -LE). Else (None, 0).
    """
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name, len(bom)
    sample = raw[:_SNIFF_BYTES - _SNIFF_BYTES % 2]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        share = lambda part: part.count(0) / len(part)  # noqa: E731
        if share(even) >= 0.9 and share(odd) <= 0.1:
            return "utf-16-be", 0
        if share(odd) >= 0.9 and share(even) <= 0.1:
            return "utf-16-le", 0
    return None, 0


def decode_bytes(raw: bytes) -> tuple[str | None, bool]:
    """Decode file bytes: (text, used_replacement), or (None, _) when the bytes look binary.

    A byte-order mark (UTF-8/16/32) or the NUL pattern of UTF-16 selects the
    encoding. Otherwise binary means a NUL byte in the first 8 KiB, or bytes
    that are not UTF-8 and whose sample is mostly control characters or
    replacement characters.
    """
    encoding, skip = sniff_encoding(raw)
    if encoding is not None:
        body = raw[skip:]
        try:
            text = body.decode(encoding)
            replaced = False
        except UnicodeDecodeError:
            text, replaced = body.decode(encoding, errors="replace"), True
        if "\x00" not in text[:_SNIFF_BYTES]:
            return text, replaced
    sample = raw[:_SNIFF_BYTES]
    if b"\x00" in sample:
        return None, False
    try:
        return raw.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        pass
    controls = sum(1 for b in sample if (b < 32 and b not in b"\t\n\r\f\v\b\x1b") or b == 127)
    decoded_sample = sample.decode("utf-8", errors="replace")
    bad = decoded_sample.count("\ufffd")
    if sample and (controls / len(sample) > 0.10 or bad / max(len(decoded_sample), 1) > 0.30):
        return None, False
    return raw.decode("utf-8", errors="replace"), True


def markdown_title(text: str) -> str | None:
    """The first level-1 ATX heading outside code fences, if any."""
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _MD_TITLE.match(line)):
            return m.group(1).strip()
    return None


def _load_file(path: Path, kind: str, stats: LoadStats, doc_id: str | None = None,
               source: str | None = None) -> Document | None:
    doc_id = doc_id or display_path(path)
    with open(path, "rb") as fh:
        raw = fh.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        stats._skip("skipped_too_large", doc_id, f"too large: over {MAX_FILE_BYTES} bytes (not read)")
        return None
    text, replaced = decode_bytes(raw)
    if text is None:
        stats._skip("skipped_binary", doc_id, "binary content")
        return None
    text = text.replace("\r\n", "\n")
    title: str | None = None
    line_start: int | None = 1
    locators: list[tuple[int, str]] = []
    access: tuple[str, ...] | None = None
    if kind == "html":
        page = extract_page(text)
        title, text = page.title, page.text
        locators = page_locators(page)
        kind = "toc" if is_toc_url(path.name) else _page_kind(page)  # markdown: chunks follow the headings
        line_start = None  # extracted text has no line correspondence with the file
    elif kind == "notebook":
        try:
            got = read_notebook(text)
        except FormatError as exc:
            stats._skip("skipped_unreadable", doc_id, f"unreadable: {exc}")
            return None
        title, text, kind, locators, line_start = got.title, got.text, got.kind, got.locators, None
    elif kind == "markdown":
        try:
            access = front_matter_access(text)
        except UsageError as exc:  # never index a document whose access list cannot be read
            stats._skip("skipped_unreadable", doc_id, f"front matter access: {exc}")
            return None
        front_title, text, skipped_lines = split_front_matter(text)
        line_start = 1 + skipped_lines  # citations keep the file's line numbers
        title = front_title or markdown_title(text)
    if not text.strip():
        stats._skip("skipped_empty", doc_id, "empty or whitespace-only")
        return None
    if replaced:
        stats.decoded_with_replacement += 1
    return Document(
        doc_id=doc_id, source=source or doc_id, title=title or path.name, text=text, kind=kind,
        content_hash=hashlib.sha256(raw).hexdigest(), line_start=line_start, locators=locators, access=access,
    )


def _load_binary_format(path: Path, kind: str, stats: LoadStats, doc_id: str, source: str | None) -> Document | None:
    """PDF and DOCX: read by their libraries (page numbers / headings kept)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            stats._skip("skipped_too_large", doc_id, f"too large: over {MAX_FILE_BYTES} bytes (not read)")
            return None
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        got = read_pdf(path) if kind == "pdf" else read_docx(path)
    except FormatError as exc:
        stats._skip("skipped_unreadable", doc_id, f"unreadable: {exc}")
        return None
    if not got.text.strip():
        stats._skip("skipped_empty", doc_id, "no extractable text (a scanned PDF needs OCR first)")
        return None
    return Document(doc_id=doc_id, source=source or doc_id, title=got.title or path.name, text=got.text,
                    kind=got.kind, content_hash=digest, line_start=None, locators=got.locators)


def _open_lines(path: Path) -> Iterator[str]:
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh


def _load_beir(path: Path, stats: LoadStats, ids: set[str]) -> list[Document]:
    """One Document per record of a BEIR `corpus.jsonl(.gz)`, streamed line by line.

    The first record decides: without `_id`, `title` and `text` the file is
    skipped as unsupported. Later malformed or duplicate records are skipped
    and listed one by one.
    """
    shown = display_path(path)
    docs: list[Document] = []
    checked = False
    try:
        for number, line in enumerate(_open_lines(path), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if not checked:
                    stats._skip("skipped_unsupported", shown, f"not JSON lines ({exc.msg} at line {number})")
                    return []
                stats._skip("skipped_records", f"{shown}:{number}", f"invalid JSON: {exc.msg}")
                continue
            has_keys = isinstance(record, dict) and all(k in record for k in BEIR_KEYS)
            if not checked:
                checked = True
                if not has_keys:
                    stats._skip("skipped_unsupported", shown,
                                f"JSON lines without the BEIR keys {', '.join(BEIR_KEYS)}")
                    return []
            if not has_keys:
                stats._skip("skipped_records", f"{shown}:{number}", "record lacks a BEIR key")
                continue
            doc_id, title, text = str(record["_id"]), str(record["title"] or ""), str(record["text"] or "")
            if doc_id in ids:
                stats._skip("skipped_records", f"{shown}#{doc_id}", "duplicate doc_id")
                continue
            if not (title.strip() or text.strip()):
                stats._skip("skipped_empty", f"{shown}#{doc_id}", "record with empty title and text")
                continue
            ids.add(doc_id)
            text = text if text.strip() else title  # a title-only record still gets searched
            digest = hashlib.sha256(f"{title}\n{text}".encode("utf-8")).hexdigest()
            docs.append(Document(doc_id=doc_id, source=f"{shown}#{doc_id}", title=title, text=text,
                                 kind="beir", content_hash=digest, line_start=None))
    except (OSError, EOFError, zlib.error) as exc:
        stats._skip("skipped_unreadable", shown, f"corrupt or unreadable archive after {len(docs)} records "
                                                 f"(none kept): {type(exc).__name__}: {exc}")
        for doc in docs:
            ids.discard(doc.doc_id)
        return []
    if not checked:
        stats._skip("skipped_empty", shown, "no records")
    return docs


def load_documents(paths: list[str | Path], *, progress: bool = False, selection=None,
                   base: Path | None = None, base_url: str | None = None) -> LoadResult:
    """Load every supported file under `paths` (files or folders) as Documents.

    Raises `UsageError` naming any path that does not exist. Skipped files are
    counted in `LoadResult.stats` and listed with their reason.
    """
    if isinstance(paths, (str, Path)):
        raise UsageError(f"paths must be a list of paths, got the single path {str(paths)!r}")
    stats = LoadStats()
    refs = collect_files(list(paths), stats, selection, base)
    id_of = {os.path.abspath(f): i for f, i, _ in refs}
    url_of = {os.path.abspath(f): f"{base_url.rstrip('/')}/{below}" for f, _, below in refs} if base_url else {}
    files = [f for f, _, _ in refs]
    if progress:
        from tqdm import tqdm

        files_iter = tqdm(files, desc="loading", unit="file")
    else:
        files_iter = files
    documents: list[Document] = []
    ids = set(id_of.values())
    for path in files_iter:
        stats.files_seen += 1
        kind = kind_of(path)
        if kind is None:
            stats._skip("skipped_unsupported", display_path(path), f"unsupported file type {path.suffix or path.name!r}")
            continue
        try:
            if kind == "beir":
                new = _load_beir(path, stats, ids)
            else:
                key = os.path.abspath(path)
                if kind in ("pdf", "docx"):
                    doc = _load_binary_format(path, kind, stats, id_of[key], url_of.get(key))
                else:
                    doc = _load_file(path, kind, stats, id_of[key], url_of.get(key))
                new = [doc] if doc is not None else []
        except (OSError, EOFError, zlib.error) as exc:
            stats._skip("skipped_unreadable", display_path(path),
                        f"unreadable: {getattr(exc, 'strerror', None) or exc}")
            continue
        if new:
            stats.files_loaded += 1
            documents.extend(new)
    _strip_site_titles([d for d in documents if d.doc_id.lower().endswith((".html", ".htm"))])
    stats.documents = len(documents)
    logger.debug("load_documents: %s", stats.summary())
    return LoadResult(documents=documents, stats=stats)


def page_document(url: str, html: str, content_hash: str) -> Document | None:
    """A crawled page as a Document: its main text (markdown, headings kept), cited by URL + #anchor."""
    page = extract_page(html)
    if not page.text.strip():
        return None
    return Document(doc_id=url, source=url, title=page.title or url, text=page.text,
                    kind="toc" if is_toc_url(url) else _page_kind(page), content_hash=content_hash, line_start=None,
                    locators=page_locators(page))


def _page_kind(page: PageText) -> str:
    """`toc` for a table-of-contents or index page (indexed for `read`, never ranked as a passage), else
    `markdown` when the text is markdown, else `html`."""
    return "toc" if page.toc else "markdown" if page.markdown else "html"


def site_documents(pages) -> list[Document]:
    """A crawl's pages as Documents (`page_document`), the site-wide title part dropped from their titles."""
    docs = [d for d in (page_document(p.url, p.html, p.content_hash) for p in pages) if d is not None]
    _strip_site_titles(docs)
    return docs


def _strip_site_titles(docs: list[Document]) -> None:
    from ragsieve.tools.ingest.site_titles import strip_site_affixes

    for doc, title in zip(docs, strip_site_affixes([d.title for d in docs])):
        doc.title = title
