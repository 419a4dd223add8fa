"""Turn files, folders and BEIR corpora into `Document`s, counting everything skipped.

Which files are read is decided in `ragsieve.tools.ingest.walk` (and
`selection`). A file's `doc_id` (and `source`) is the indexed folder's name
and the path below it in posix form (`examples/docs/api-keys.md`), whatever
the working directory, so re-indexing the same tree from anywhere gives the
same ids.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragsieve.tools.access.front_matter import front_matter_access
from ragsieve.tools.errors import MissingExtraError, UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.ingest.beir import load_beir
from ragsieve.tools.ingest.decoding import decode_bytes
from ragsieve.tools.ingest.formats import FormatError, read_docx, read_notebook, read_pdf, split_front_matter
from ragsieve.tools.ingest.pages import page_kind, strip_site_titles
from ragsieve.tools.ingest.syntax import language_of
from ragsieve.tools.ingest.walk import LoadStats, collect_files, display_path
from ragsieve.tools.ingest.web_text import extract_page, is_toc_url, page_locators
from ragsieve.tools.types import Document

if TYPE_CHECKING:
    from ragsieve.tools.ingest.selection import Selection

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {
    ".txt": "text",
    ".rst": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".ipynb": "notebook",
    ".pdf": "pdf",
    ".docx": "docx",
}
CODE_SUFFIXES = frozenset(
    ".py .js .ts .tsx .jsx .java .go .rs .c .h .cpp .hpp .cs .rb .php .sh .sql .kt .swift .scala .yaml .yml .toml".split()
)
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


def markdown_title(text: str) -> str | None:
    """The first level-1 ATX heading outside code fences, if any."""
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _MD_TITLE.match(line)):
            return m.group(1).strip()
    return None


def _load_file(path: Path, kind: str, stats: LoadStats, doc_id: str | None = None, source: str | None = None) -> Document | None:
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
        kind = "toc" if is_toc_url(path.name) else page_kind(page)  # markdown: chunks follow the headings
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
        doc_id=doc_id,
        source=source or doc_id,
        title=title or path.name,
        text=text,
        kind=kind,
        content_hash=hashlib.sha256(raw).hexdigest(),
        line_start=line_start,
        locators=locators,
        access=access,
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
    return Document(
        doc_id=doc_id,
        source=source or doc_id,
        title=got.title or path.name,
        text=got.text,
        kind=got.kind,
        content_hash=digest,
        line_start=None,
        locators=got.locators,
    )


def read_one(path: Path, stats: LoadStats, doc_id: str, url: str | None, ids: set[str], *, syntax: bool = True) -> list[Document]:
    """The documents of one file, counted in `stats` (`files_seen`, `files_loaded`); a file that cannot be read
    is skipped and named there with its reason, never raised: a missing reader extra (`skipped_missing_extra`,
    naming the `pip install` that reads it) or any reader error (`skipped_unreadable`). `syntax`: code is cut by
    its syntax tree, so a code file in a language with a grammar needs the code extra."""
    stats.files_seen += 1
    kind = kind_of(path)
    if kind is None:
        stats._skip("skipped_unsupported", display_path(path), f"unsupported file type {path.suffix or path.name!r}")
        return []
    try:
        if kind == "beir":
            new = load_beir(path, stats, ids)
        elif kind in ("pdf", "docx"):
            doc = _load_binary_format(path, kind, stats, doc_id, url)
            new = [doc] if doc is not None else []
        else:
            if kind == "code" and syntax and language_of(path.name) is not None:
                require(
                    Extra.CODE, "tree_sitter_language_pack", "cutting code by its syntax tree", "or --no-syntax: cut by lines"
                )
            doc = _load_file(path, kind, stats, doc_id, url)
            new = [doc] if doc is not None else []
    except MissingExtraError as exc:
        reason = str(exc).partition(" needs the ")[2] or f"{exc.extra} extra: {exc}"
        stats._skip("skipped_missing_extra", display_path(path), f"needs the {reason}")
        return []
    except (OSError, EOFError, zlib.error) as exc:
        stats._skip("skipped_unreadable", display_path(path), f"unreadable: {getattr(exc, 'strerror', None) or exc}")
        return []
    except Exception as exc:  # a reader library's own failure on this file: skipped and named, the run goes on
        logger.debug("reading %s failed", path, exc_info=True)
        stats._skip("skipped_unreadable", display_path(path), f"unreadable: {type(exc).__name__}: {exc}")
        return []
    if new:
        stats.files_loaded += 1
    return new


def load_documents(
    paths: list[str | Path],
    *,
    progress: bool = False,
    selection: Selection | None = None,
    base: Path | None = None,
    base_url: str | None = None,
    syntax: bool = True,
) -> LoadResult:
    """Load every supported file under `paths` (files or folders) as Documents.

    Raises `UsageError` naming any path that does not exist. Skipped files (unreadable ones included: see
    `read_one`) are counted in `LoadResult.stats` and listed with their reason.
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
        key = os.path.abspath(path)
        new = read_one(path, stats, id_of.get(key) or display_path(path), url_of.get(key), ids, syntax=syntax)
        if new:
            documents.extend(new)
    strip_site_titles([d for d in documents if d.doc_id.lower().endswith((".html", ".htm"))])
    stats.documents = len(documents)
    logger.debug("load_documents: %s", stats.summary())
    return LoadResult(documents=documents, stats=stats)
