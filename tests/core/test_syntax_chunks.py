"""Syntax-aware code chunks (cAST over tree-sitter) on real code nobody here wrote: CPython's stdlib."""

from __future__ import annotations

import ast
import http.client
import json
import re
from pathlib import Path

import pytest

from ragsieve.tools.ingest.chunking import Chunker, count_tokens
from ragsieve.tools.ingest.syntax import available, cast_spans, language_of
from ragsieve.tools.types import Document

HTTP_CLIENT = Path(http.client.__file__)
SAMPLES = {
    "javascript": ("a.js", "class Store {\n  get(k) {\n    return this.m[k];\n  }\n}\nfunction f(x) {\n  return x + 1;\n}\n"),
    "typescript": ("a.ts", "interface P { x: number }\nclass Store {\n  get(k: string): number {\n    return 1;\n  }\n}\n"),
    "go": ("a.go", "package m\n\ntype S struct{}\n\nfunc (s S) Get() int {\n\treturn 1\n}\n"),
    "java": ("A.java", "class A {\n  int get() {\n    return 1;\n  }\n}\n"),
    "rust": ("a.rs", "struct S;\nimpl S {\n    fn get(&self) -> i32 {\n        1\n    }\n}\n"),
    "c": ("a.c", "int get(int x) {\n  return x;\n}\n"),
    "cpp": ("a.cpp", "class A {\n public:\n  int get() { return 1; }\n};\n"),
}


def doc(path: str, text: str) -> Document:
    return Document(doc_id=path, source=path, title=Path(path).name, text=text, kind="code")


def test_grammars_load_offline_for_the_main_languages():
    for language in ("python", "javascript", "typescript", "go", "java", "rust", "c", "cpp"):
        assert available(language), language
    assert language_of("x/y.PY") == "python" and language_of("x.unknown") is None


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_small_files_name_their_symbols(language):
    name, text = SAMPLES[language]
    chunks = Chunker(200).run(doc(name, text))
    assert len(chunks) == 1 and chunks[0].text == text.strip()
    assert chunks[0].symbol, language  # the definitions in the chunk are named


def _statement_lines(text: str) -> set[int]:
    """1-based lines where a statement starts (stdlib `ast`, independent of tree-sitter)."""
    lines = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt):
            lines.add(node.lineno)
            lines.update(d.lineno for d in getattr(node, "decorator_list", []))
    return lines


def _first_code_line(chunk) -> int:
    for offset, line in enumerate(chunk.text.split("\n")):
        if line.strip() and not line.strip().startswith("#"):
            return chunk.line_start + offset
    return chunk.line_start


def _defs(text: str) -> list[tuple[int, int]]:
    return [
        (n.lineno, n.end_lineno)
        for n in ast.walk(ast.parse(text))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]


def test_http_client_chunks_tile_the_file_and_keep_definitions_whole():
    text = HTTP_CLIENT.read_text(encoding="utf-8")
    chunks = Chunker(200).run(doc("http/client.py", text))
    lines = text.split("\n")
    # contiguous line spans from the first line to the last non-blank one
    assert chunks[0].line_start == 1
    assert all(a.line_end < b.line_start for a, b in zip(chunks, chunks[1:]))
    covered = sum(c.line_end - c.line_start + 1 for c in chunks)
    assert covered >= len([ln for ln in lines if ln.strip()])
    # `_read_chunked` is found by name in the chunk that holds its `def`
    home = [c for c in chunks if "def _read_chunked(" in c.text]
    assert len(home) == 1 and "HTTPResponse._read_chunked" in home[0].symbol
    # a chunk that starts inside a function or class says which one
    for c in chunks:
        inside = [d for d in _defs(text) if d[0] < c.line_start <= d[1]]
        if inside:
            assert c.symbol, (c.line_start, c.text.split("\n")[0])
    over = [c for c in chunks if count_tokens(c.text) > 200]
    assert len(over) <= 2  # only unsplittable leaves (a long string) may exceed the budget


def test_syntax_chunks_start_at_statements_line_chunks_do_not():
    text = HTTP_CLIENT.read_text(encoding="utf-8")
    d = doc("http/client.py", text)
    statements = _statement_lines(text)

    def mid_statement(chunks):
        return sum(1 for c in chunks[1:] if _first_code_line(c) not in statements)

    syntax, lines = mid_statement(Chunker(200).run(d)), mid_statement(Chunker(200, syntax=False).run(d))
    assert syntax <= 3 < lines  # only pieces of an over-budget string or comment start inside a statement


def test_long_function_is_split_in_order_with_its_signature_first():
    body = "\n".join(f"    x{i} = compute({i}, value, other)  # step {i}" for i in range(120))
    text = f"class Big:\n    def run(self, value, other):\n{body.replace(chr(10), chr(10) + '    ')}\n        return x0\n"
    text = (
        "class Big:\n    def run(self, value, other):\n"
        + "\n".join(f"        x{i} = compute({i}, value, other)  # step {i}" for i in range(120))
        + "\n        return x0\n"
    )
    chunks = Chunker(200).run(doc("big.py", text))
    assert len(chunks) >= 3
    assert chunks[0].text.startswith("class Big:\n    def run(self, value, other):")  # the signature leads
    assert all(c.symbol == "Big.run" for c in chunks[1:])
    order = [int(m) for c in chunks for m in re.findall(r"# step (\d+)", c.text)]
    assert order == list(range(120))  # contiguous pieces neighbour expansion can stitch


def test_unknown_language_falls_back_to_lines():
    text = "\n".join(f"line {i} of a shell script" for i in range(300))
    chunks = Chunker(200).run(doc("run.sh", text))
    assert len(chunks) > 1 and all(c.symbol == "" for c in chunks)


def test_cast_spans_refuse_nothing_on_odd_input():
    assert cast_spans("", "python", 50) == [] or cast_spans("", "python", 50)[0].start_line == 0
    broken = "def f(:\n  return )))\nclass\n"
    spans = cast_spans(broken, "python", 50)  # tree-sitter recovers from syntax errors
    assert spans and spans[0].start_line == 0


def test_symbols_reach_the_index_text_and_citations(tmp_path, embedder):
    from ragsieve.agent.core.state import Citation
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.building.report import indexed_text
    from ragsieve.tools.index.local.index import HybridIndex

    (tmp_path / "src" / "http").mkdir(parents=True)
    (tmp_path / "src" / "http" / "client.py").write_text(HTTP_CLIENT.read_text(encoding="utf-8"), encoding="utf-8")
    IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build([tmp_path / "src"])
    with HybridIndex.open(tmp_path / "idx") as index:
        chunks = index.store.get_many(range(len(index)))
        home = next(c for c in chunks if "def _read_chunked(" in c.text)
        assert home.symbol and indexed_text(home).startswith(f"src/http/client.py {home.symbol}\n")
        label = Citation(
            number=1,
            chunk_id=home.chunk_id,
            source=home.source,
            line_start=home.line_start,
            line_end=home.line_end,
            symbol=home.symbol,
        ).label()
        assert re.fullmatch(r"src/http/client\.py:\d+-\d+ \(.*HTTPResponse\._read_chunked.*\)", label)
        manifest = json.loads((Path(index.generation) / "manifest.json").read_text()) if hasattr(index, "generation") else None
        assert manifest is None or manifest["settings"]["chunking"]["code"] == "cast-1"
