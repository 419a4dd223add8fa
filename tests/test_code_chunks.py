"""Syntax-aware code chunking (cAST over tree-sitter) with symbols in titles and citations."""
from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from ragsieve.agent.plan.state import Citation
from ragsieve.tools.ingest.chunking import Chunker, count_tokens
from ragsieve.tools.types import Document

pytest.importorskip("tree_sitter_language_pack")

PY = '''import os


class Store:
    """A store."""

    def get(self, key):
        return self.data[key]

    def put(self, key, value):
        self.data[key] = value


def helper(x):
    return x + 1
'''


def _doc(text: str, name: str) -> Document:
    return Document(doc_id=name, source=name, title=Path(name).name, text=text, kind="code")


def _check_tiling(doc: Document, chunks) -> None:
    lines = doc.text.split("\n")
    for c in chunks:
        assert "\n".join(lines[c.line_start - 1:c.line_end]).strip() == c.text.strip()
    starts = [c.line_start for c in chunks]
    assert starts == sorted(starts)


def test_small_python_file_gets_symbols_per_chunk():
    doc = _doc(PY * 1, "pkg/store.py")
    chunks = Chunker(16).run(doc)
    _check_tiling(doc, chunks)
    by_symbol = {c.symbol: c for c in chunks}
    assert "Store.get" in by_symbol and "Store.put" in by_symbol and "helper" in by_symbol
    get = by_symbol["Store.get"]
    assert get.text.lstrip().startswith("def get") and get.title == "store.py (Store.get)"
    assert get.label() == f"pkg/store.py:{get.line_start}-{get.line_end} (Store.get)"
    cite = Citation(number=1, chunk_id=get.chunk_id, source=get.source, line_start=get.line_start,
                    line_end=get.line_end, symbol=get.symbol)
    assert cite.label() == get.label()


def test_long_function_becomes_contiguous_chunks_that_start_on_statements():
    body = "\n".join(f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 120))
    text = f"def long_one(value_0):\n{body}\n    return value_119\n\n\ndef after():\n    return 2\n"
    doc = _doc(text, "m.py")
    chunks = Chunker(100).run(doc)
    _check_tiling(doc, chunks)
    parts = [c for c in chunks if c.symbol == "long_one"]
    assert len(parts) >= 4
    assert [c.chunk_index for c in parts] == list(range(parts[0].chunk_index, parts[0].chunk_index + len(parts)))
    assert all(b.line_start == a.line_end + 1 for a, b in zip(parts, parts[1:]))
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert chunks[-1].symbol == "after"


@pytest.mark.parametrize("name,text,symbol", [
    ("a.js", "class Cart {\n  total(items) {\n    return items.length;\n  }\n}\n", "Cart.total"),
    ("a.ts", "export function sum(a: number, b: number): number {\n  return a + b;\n}\n", "sum"),
    ("a.go", "package m\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\n", "Start"),
    ("A.java", "class Shop {\n  int count() {\n    return 1;\n  }\n}\n", "Shop.count"),
    ("a.rs", "impl Engine {\n    fn run(&self) -> u8 {\n        1\n    }\n}\n", "Engine.run"),
    ("a.c", "int add(int a, int b) {\n  return a + b;\n}\n", "add"),
    ("a.cpp", "namespace ns {\nint twice(int a) {\n  return 2 * a;\n}\n}\n", "ns.twice"),
])
def test_grammars_name_the_enclosing_symbol(name, text, symbol):
    chunks = Chunker(8).run(_doc(text * 1, name))
    assert symbol in {c.symbol for c in chunks}, [(c.symbol, c.text) for c in chunks]


def test_language_without_grammar_and_lines_mode_use_the_line_chunker():
    text = "key: value\nother: 2\n" * 40
    yaml = Chunker(50).run(_doc(text, "conf.yaml"))
    assert yaml == Chunker(50, "lines").run(_doc(text, "conf.yaml"))
    assert all(c.symbol is None for c in yaml)
    lines = Chunker(16, "lines").run(_doc(PY, "s.py"))
    assert all(c.symbol is None for c in lines)
    with pytest.raises(Exception, match="syntax, lines"):
        Chunker(16, "ast")


def test_real_stdlib_module_keeps_read_chunked_whole_and_named():
    path = Path(sysconfig.get_paths()["stdlib"]) / "http" / "client.py"
    doc = _doc(path.read_text(encoding="utf-8"), "http/client.py")
    chunks = Chunker(200).run(doc)
    _check_tiling(doc, chunks)
    hits = [c for c in chunks if "def _read_chunked" in c.text]
    assert len(hits) == 1 and hits[0].symbol == "HTTPResponse._read_chunked"
    assert all(count_tokens(c.text) <= 200 for c in chunks)
    no_headers = Chunker(200, symbol_headers=False).run(doc)
    assert [c.text for c in no_headers] == [c.text for c in chunks]
    assert all(c.title == "client.py" for c in no_headers)
