"""`source-first` ranking for "where is X implemented": definitions in source files before tests and prose.

Hybrid retrieval often ranks a test that calls a function, or the prose that
describes it, above the function itself. Under `retrieval.ranking =
"source-first"` the retriever reads a deeper window of the fused list
(`DEPTH` x top_k, at least `MIN_DEPTH`), orders it by class, then by fused
rank within a class (a stable sort), and keeps the top k:

0. a definition (a chunk with a code symbol) in a source file,
1. other code in a source file,
2. code in a test file (`tests/`, `test_*.py`, `*_test.go`, `*.spec.ts`, `conftest.py`...),
3. everything else (prose, web pages, PDFs).
"""

from __future__ import annotations

import re

from ragsieve.tools.types import Hit

DEPTH = 4
MIN_DEPTH = 40
_TEST_DIR = re.compile(r"(^|/)(tests?|testing|__tests__|spec|specs)/", re.IGNORECASE)
_TEST_FILE = re.compile(r"(^test_.*|.*_tests?\.[a-z]+|.*\.(test|spec)\.[a-z]+|conftest\.py)$", re.IGNORECASE)


def is_test_path(source: str) -> bool:
    path = source.split("#", 1)[0]
    return bool(_TEST_DIR.search(path) or _TEST_FILE.match(path.rsplit("/", 1)[-1]))


def source_class(hit: Hit) -> int:
    chunk = hit.chunk
    if chunk.kind != "code":
        return 3
    if is_test_path(chunk.source):
        return 2
    return 0 if chunk.symbol and not chunk.symbol.startswith("#") else 1


def source_first(hits: list[Hit], top_k: int) -> list[Hit]:
    """The best `top_k` of `hits` (fused order) by class, then fused rank; ranks renumbered from 1."""
    ordered = sorted(hits, key=source_class)[:top_k]  # sorted() is stable: the fused order within a class
    for i, hit in enumerate(ordered, start=1):
        hit.rank = i
    return ordered
