"""BEIR corpora (`corpus.jsonl`, `corpus.jsonl.gz`) as `Document`s, streamed record by record."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from ragsieve.tools.ingest.walk import LoadStats, display_path
from ragsieve.tools.types import Document

BEIR_KEYS = ("_id", "title", "text")


def open_lines(path: Path) -> Iterator[str]:
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh


def load_beir(path: Path, stats: LoadStats, ids: set[str]) -> list[Document]:
    """One Document per record of a BEIR `corpus.jsonl(.gz)`, streamed line by line.

    The first record decides: without `_id`, `title` and `text` the file is
    skipped as unsupported. Later malformed or duplicate records are skipped
    and listed one by one.
    """
    shown = display_path(path)
    docs: list[Document] = []
    checked = False
    try:
        for number, line in enumerate(open_lines(path), start=1):
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
                    stats._skip("skipped_unsupported", shown, f"JSON lines without the BEIR keys {', '.join(BEIR_KEYS)}")
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
            docs.append(
                Document(
                    doc_id=doc_id,
                    source=f"{shown}#{doc_id}",
                    title=title,
                    text=text,
                    kind="beir",
                    content_hash=digest,
                    line_start=None,
                )
            )
    except (OSError, EOFError, zlib.error) as exc:
        stats._skip(
            "skipped_unreadable",
            shown,
            f"corrupt or unreadable archive after {len(docs)} records (none kept): {type(exc).__name__}: {exc}",
        )
        for doc in docs:
            ids.discard(doc.doc_id)
        return []
    if not checked:
        stats._skip("skipped_empty", shown, "no records")
    return docs
