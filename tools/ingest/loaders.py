"""Turn files, folders and BEIR corpora into `Document`s, counting everything skipped.

Which files are read is decided in `ragsieve.tools.ingest.walk` (with the
include/exclude globs of `ragsieve.tools.ingest.path_filter`). A file's
`doc_id` (and `source`) is its path relative to the indexed folder, prefixed
by the folder's name (`docs/guide.md`), so the same tree indexed from any
working directory gives the same ids.
"""
from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import logging
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.formats import FormatError, read_docx, read_notebook, read_pdf, split_front_matter
from ragsieve.tools.ingest.html_main import extract_main
from ragsieve.tools.ingest.html_text import html_to_text
from ragsieve.tools.ingest.path_filter import PathFilter
from ragsieve.tools.ingest.walk import LoadStats, collect_files, display_path
from ragsieve.tools.types import Document

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt": "text", ".rst": "text", ".md": "markdown", ".markdown": "markdown",
                 ".html": "html", ".htm": "html"}
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


BINARY_FORMATS = {".pdf": "pdf", ".docx": "docx"}


def _kind_of(path: Path) -> str | None:
    name = path.name.lower()
    if path.suffix.lower() in BINARY_FORMATS:
        return BINARY_FORMATS[path.suffix.lower()]
    if path.suffix.lower() == ".ipynb":
        return "notebook"
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


def _load_file(path: Path, doc_id: str, kind: str, stats: LoadStats, base_url: str | None = None) -> Document | None:
    with open(path, "rb") as fh:
        raw = fh.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        stats._skip("skipped_too_large", doc_id, f"too large: over {MAX_FILE_BYTES} bytes (not read)")
        return None
    title: str | None = None
    line_start: int | None = 1
    source = doc_id
    sections: list[tuple[int, str, str]] = []
    replaced = False
    if kind in BINARY_FORMATS.values():
        try:
            got = (read_pdf if kind == "pdf" else read_docx)(raw)
        except FormatError as exc:
            stats._skip("skipped_unreadable", doc_id, f"unreadable {kind}: {exc}")
            return None
        text, title, sections, line_start = got.text, got.title, got.sections, None
        kind = "text" if kind == "pdf" else "markdown"
    else:
        text, replaced = decode_bytes(raw)
        if text is None:
            stats._skip("skipped_binary", doc_id, "binary content")
            return None
        text = text.replace("\r\n", "\n")
    if kind == "notebook":
        try:
            got = read_notebook(text)
        except FormatError as exc:
            stats._skip("skipped_unreadable", doc_id, f"unreadable notebook: {exc}")
            return None
        text, title, sections, line_start, kind = got.text, got.title, got.sections, None, "markdown"
    elif kind == "html":
        main = extract_main(text)
        if main is not None:
            title, text, sections = main
        else:
            title, text = html_to_text(text)
        line_start = None  # extracted text has no line correspondence with the file
        if base_url:
            source = urljoin(base_url.rstrip("/") + "/", doc_id.split("/", 1)[1] if "/" in doc_id else doc_id)
    elif kind == "markdown" and line_start == 1:
        title, text, line_start = split_front_matter(text)
        title = title or markdown_title(text)
    if not text.strip():
        stats._skip("skipped_empty", doc_id, "empty or whitespace-only")
        return None
    if replaced:
        stats.decoded_with_replacement += 1
    return Document(
        doc_id=doc_id, source=source, title=title or path.name, text=text, kind=kind,
        content_hash=hashlib.sha256(raw).hexdigest(), line_start=line_start, sections=sections,
    )


def _open_lines(path: Path) -> Iterator[str]:
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh


def _load_beir(path: Path, shown: str, stats: LoadStats, ids: set[str]) -> list[Document]:
    """One Document per record of a BEIR `corpus.jsonl(.gz)`, streamed line by line.

    The first record decides: without `_id`, `title` and `text` the file is
    skipped as unsupported. Later malformed or duplicate records are skipped
    and listed one by one.
    """
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


def load_documents(paths: list[str | Path], *, progress: bool | Callable[[str, int, int], None] = False,
                   path_filter: PathFilter | None = None, base_url: str | None = None) -> LoadResult:
    """Load every supported file under `paths` (files or folders) as Documents.

    Raises `UsageError` naming any path that does not exist. Skipped files are
    counted in `LoadResult.stats` and listed with their reason.
    """
    if isinstance(paths, (str, Path)):
        raise UsageError(f"paths must be a list of paths, got the single path {str(paths)!r}")
    stats = LoadStats()
    files = collect_files(list(paths), stats, path_filter)
    if progress is True:
        from tqdm import tqdm

        files_iter = tqdm(files, desc="loading", unit="file")
    else:
        files_iter = files
    report = progress if callable(progress) else (lambda stage, done, total: None)
    documents: list[Document] = []
    ids = {doc_id for _, doc_id in files}
    for number, (path, doc_id) in enumerate(files_iter):
        report("loading", number, len(files))
        stats.files_seen += 1
        kind = _kind_of(path)
        if kind is None:
            stats._skip("skipped_unsupported", display_path(path), f"unsupported file type {path.suffix or path.name!r}")
            continue
        try:
            if kind == "beir":
                new = _load_beir(path, doc_id, stats, ids)
            else:
                doc = _load_file(path, doc_id, kind, stats, base_url)
                new = [doc] if doc is not None else []
        except (OSError, EOFError, zlib.error) as exc:
            stats._skip("skipped_unreadable", display_path(path),
                        f"unreadable: {getattr(exc, 'strerror', None) or exc}")
            continue
        if new:
            stats.files_loaded += 1
            documents.extend(new)
    report("loading", -1, len(files))
    stats.documents = len(documents)
    logger.debug("load_documents: %s", stats.summary())
    return LoadResult(documents=documents, stats=stats)
