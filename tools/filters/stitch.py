"""Whole definitions in the context: a function split over several code chunks is read as one passage.

cAST (`ragsieve.tools.ingest.syntax`) cuts a long function into pieces; retrieval often finds one piece
(the loop of `HTTPResponse._read_chunked`, the middle of `asyncio.wait_for`), and an answer written from
it misses the signature or the rest of the body. `stitch_definitions` replaces every code hit that is a
piece of a longer definition by the whole definition: the file's lines are rebuilt from the document's
chunks (they tile the file) and parsed with the same grammar. The definition is the last one whose
signature is in the piece while its body runs on; else the innermost one the piece is the middle or the
tail of (a piece holding whole methods of a long class is left alone). The passage is cited with the
definition's lines and qualified name (`http/client.py:585-626 (HTTPResponse._read_chunked)`); several
hits in one definition become one passage. A definition is stitched only while the whole context stays
within `budget_tokens`; when it does not fit, the pieces stay as they are.

`one_per_definition` is the retrieval side of the same reading: a ranked list keeps only the best-ranked
piece of each split definition (stitching reads it whole), so a top-k holds k different passages instead of
two pieces of one function (on the code benchmark's 539 docstring queries, 201 top-5 lists held such a
pair; benchmarks/results/sources.json).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ragsieve.tools.ingest.chunking import count_tokens
from ragsieve.tools.types import Chunk, Hit

if TYPE_CHECKING:
    from ragsieve.tools.index.backend import ChunkSource

Parsed = tuple[list[str], Any]  # a document's lines and its tree-sitter tree (None when it did not parse)

MAX_DEFINITION_LINES = 400


def stitch_definitions(hits: list[Hit], store: ChunkSource, budget_tokens: int) -> list[Hit]:
    """`hits` with each piece of a split definition replaced by the whole definition (see the module doc)."""
    used = sum(count_tokens(h.chunk.text) for h in hits)
    out: list[Hit] = []
    covered: dict[tuple[str, int, int], int] = {}  # (doc, first line, last line) -> position in out
    files: dict[str, Parsed] = {}
    for hit in hits:
        span = _definition_span(hit.chunk, store, files)
        if span is None:
            out.append(hit)
            continue
        doc_key = (hit.chunk.doc_id, span[0], span[1])
        if doc_key in covered:  # another piece of a definition already stitched: one passage
            continue
        lines, _ = files[hit.chunk.doc_id]
        text = "".join(lines[span[0] - 1 : span[1]]).rstrip()
        added = count_tokens(text) - count_tokens(hit.chunk.text)
        if used + added > budget_tokens:
            out.append(hit)
            continue
        used += added
        chunk = Chunk(
            doc_id=hit.chunk.doc_id,
            chunk_index=hit.chunk.chunk_index,
            text=text,
            source=hit.chunk.source,
            title=hit.chunk.title,
            kind=hit.chunk.kind,
            line_start=span[0],
            line_end=span[1],
            symbol=span[2],
        )
        covered[doc_key] = len(out)
        out.append(
            hit.model_copy(update={"chunk": chunk, "extra": {**hit.extra, "stitched_lines": float(span[1] - span[0] + 1)}})
        )
    return out


def one_per_definition(
    hits: list[Hit],
    store: ChunkSource,
    files: ParsedCache | None = None,
    seen: set[tuple[str, int, int]] | None = None,
) -> list[Hit]:
    """`hits` without the later pieces of a split definition whose better-ranked piece is already in the list
    (order and fields kept). `files` caches parsed documents (a dict, or `ParsedFiles` across calls); `seen`
    carries the definitions of earlier parts of the same list (updated)."""
    files = {} if files is None else files
    seen = set() if seen is None else seen
    out: list[Hit] = []
    for hit in hits:
        span = _definition_span(hit.chunk, store, files)
        if span is not None:
            key = (hit.chunk.doc_id, span[0], span[1])
            if key in seen:
                continue
            seen.add(key)
        out.append(hit)
    return out


class ParsedFiles:
    """Parsed documents kept across calls on one opened index (its chunks do not change): the `size` most
    recently used. Thread-safe."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._entries: OrderedDict[str, Parsed] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, doc_id: str) -> Parsed | None:
        with self._lock:
            entry = self._entries.get(doc_id)
            if entry is not None:
                self._entries.move_to_end(doc_id)
            return entry

    def __setitem__(self, doc_id: str, entry: Parsed) -> None:
        with self._lock:
            self._entries[doc_id] = entry
            self._entries.move_to_end(doc_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


ParsedCache = dict[str, Parsed] | ParsedFiles


def _definition_span(chunk: Chunk, store: ChunkSource, files: ParsedCache) -> tuple[int, int, str] | None:
    """(first line, last line, qualified name) of the definition `chunk` is a piece of, or None."""
    if chunk.kind != "code" or chunk.line_start is None or chunk.line_end is None:
        return None
    from ragsieve.tools.ingest.syntax import DEFINITIONS, available, language_of, qualified_name

    language = language_of(chunk.source)
    if not available(language):
        return None
    entry = files.get(chunk.doc_id)
    if entry is None:
        entry = files[chunk.doc_id] = _parsed(store.chunks_of(chunk.doc_id), language)
    lines, tree = entry
    if tree is None:
        return None
    first, last = chunk.line_start - 1, chunk.line_end - 1  # 0-based, as tree-sitter counts rows
    heads, around, complete = [], [], False
    todo = [tree.root_node]
    while todo:
        node = todo.pop()
        for child in node.children:
            if child.end_point[0] < first or child.start_point[0] > last:
                continue  # only the nodes overlapping the piece are visited
            todo.append(child)
            if child.type not in DEFINITIONS or not child.is_named:
                continue
            start, end = _outer(child).start_point[0], child.end_point[0]
            if start >= first and end <= last:
                complete = True
            elif start >= first:
                heads.append((start, end, child))  # its signature is in the piece, its body runs on
            else:
                around.append((start, end, child))  # the piece is its middle or its tail
    if heads:
        start, end, node = max(heads, key=lambda h: h[0])  # the last one: it is what the piece runs into
    elif around and not (complete and all(e > last for _, e, _ in around)):
        start, end, node = max(around, key=lambda h: h[0])  # the innermost
    else:
        return None  # whole definitions only (or a method inside a long class): nothing to stitch
    if end - start + 1 > MAX_DEFINITION_LINES:
        return None
    return start + 1, end + 1, qualified_name(node)


def _outer(node: Any) -> Any:
    """The definition with its decorators (`decorated_definition`) or export wrapper."""
    parent = node.parent
    if parent is not None and parent.type in ("decorated_definition", "export_statement"):
        return parent
    return node


def _parsed(chunks: list[Chunk], language: str) -> tuple[list[str], Any]:
    """The file's lines rebuilt from its chunks (gaps between chunks are blank lines) and its parse tree."""
    from ragsieve.tools.ingest.syntax import _lock, _parser

    last = max((c.line_end or 0) for c in chunks) if chunks else 0
    lines = ["\n"] * last
    for c in chunks:
        if c.line_start is None:
            return [], None
        for i, line in enumerate(c.text.split("\n")):
            at = c.line_start - 1 + i
            if 0 <= at < last:
                lines[at] = line + "\n"
    source = "".join(lines).encode("utf-8", "surrogatepass")
    with _lock:
        tree = _parser(language).parse(source)
    return lines, tree
