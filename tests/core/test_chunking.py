"""Chunker invariants: contiguous, ordered, within budget, correct line spans in the original file."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.chunking import MAX_CHARS_PER_TOKEN, Chunker, count_tokens, pack
from ragsieve.tools.ingest.loaders import load_documents
from ragsieve.tools.types import Chunk, Document

REPO = Path(__file__).resolve().parents[2]


def doc(text: str, kind: str = "text", line_start: int | None = 1, **kw) -> Document:
    return Document(
        doc_id=kw.pop("doc_id", "d"),
        source=kw.pop("source", "src/d"),
        title=kw.pop("title", "T"),
        text=text,
        kind=kind,
        line_start=line_start,
        **kw,
    )


def check_invariants(d: Document, chunks: list[Chunk], budget: int, file_lines: list[str] | None = None) -> None:
    """Order, no overlap, whitespace-only gaps, budget and line spans, checked against the text itself."""
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    pos = 0
    for c in chunks:
        assert c.text and c.text == c.text.rstrip()
        found = d.text.find(c.text, pos)
        assert found >= pos, f"chunk {c.chunk_index} not found in order"
        assert d.text[pos:found].strip() == "", "non-whitespace text was dropped or duplicated"
        pos = found + len(c.text)
        assert (c.doc_id, c.source, c.title, c.kind) == (d.doc_id, d.source, d.title, d.kind)
        n = count_tokens(c.text)
        assert n <= budget, f"chunk {c.chunk_index} has {n} > {budget} tokens"
        assert len(c.text) <= budget * MAX_CHARS_PER_TOKEN
    assert d.text[pos:].strip() == ""
    if d.line_start is None:
        assert all(c.line_start is None and c.line_end is None for c in chunks)
        return
    lines = file_lines if file_lines is not None else d.text.split("\n")
    for c in chunks:
        assert 1 <= c.line_start <= c.line_end <= len(lines)
        span = lines[c.line_start - 1 : c.line_end]
        assert c.text in "\n".join(span)
        first, last = c.text.split("\n")[0], c.text.split("\n")[-1]
        assert first.strip() and first in span[0]
        assert last.strip() and last in span[-1]
        if d.kind == "code" and all(
            count_tokens(x) <= budget and len(x) <= budget * MAX_CHARS_PER_TOKEN for x in span
        ):  # whole lines, indentation kept
            assert c.text.split("\n")[:-1] == span[:-1] and last == span[-1].rstrip()


def test_count_tokens_hand_computed():
    assert count_tokens("Hello, world! x_y 42") == 6  # Hello , world ! x_y 42
    assert count_tokens("def f(a=1):") == 8  # def f ( a = 1 ) :
    assert count_tokens("caf\u00e9 \u2014 ok") == 3  # unicode word, dash, word
    assert count_tokens("  \n\t") == 0


@pytest.mark.parametrize("bad", [0, -5, True, "200", 2.5, None])
def test_chunk_tokens_validated(bad):
    with pytest.raises(UsageError, match="chunk_tokens"):
        Chunker(bad)


def test_pack_hand_computed():
    assert pack([3, 3, 3, 3], [2, 0, 2, 0], 7) == [(0, 2), (2, 4)]
    # the section boundary at 2 beats the later plain one at 4 (fill 4/8 >= 1/3)
    assert pack([2, 2, 2, 2, 2], [0, 0, 3, 0, 0], 8) == [(0, 2), (2, 5)]
    # too little fill before the boundary: cut as late as possible
    assert pack([1, 5, 5], [0, 3, 0], 9) == [(0, 2), (2, 3)]
    assert pack([20, 1], [0, 0], 5) == [(0, 1), (1, 2)]  # one unit over budget stands alone
    assert pack([], [], 5) == []


def test_empty_document_has_no_chunks():
    assert Chunker(10).run(doc("  \n\n  ")) == []


def test_paragraphs_are_packed_whole():
    paras = [" ".join(f"w{p}_{i}" for i in range(12)) for p in range(6)]
    d = doc("\n\n".join(paras) + "\n", kind="markdown")
    chunks = Chunker(30).run(d)
    check_invariants(d, chunks, 30)
    assert [c.text for c in chunks] == ["\n\n".join(paras[i : i + 2]) for i in range(0, 6, 2)]
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 3), (5, 7), (9, 11)]


def test_markdown_heading_preferred_over_later_paragraph_break():
    text = "# Intro\n\n" + "a " * 20 + "\n\n## Next\n\n" + "b " * 10 + "\n\n" + "c " * 30 + "\n"
    d = doc(text, kind="markdown")
    chunks = Chunker(60).run(d)
    check_invariants(d, chunks, 60)
    assert chunks[1].text.startswith("## Next")


def test_long_paragraph_split_at_sentences_then_tokens():
    sentences = [" ".join(["word"] * 9) + "." for _ in range(8)]  # 10 tokens each
    d = doc(" ".join(sentences), kind="text")
    chunks = Chunker(25).run(d)
    check_invariants(d, chunks, 25)
    assert all(c.text.endswith(".") for c in chunks)
    assert [count_tokens(c.text) for c in chunks] == [20, 20, 20, 20]
    run_on = doc(" ".join(f"t{i}" for i in range(95)))
    chunks = Chunker(20).run(run_on)
    check_invariants(run_on, chunks, 20)
    assert [count_tokens(c.text) for c in chunks] == [20, 20, 20, 20, 15]


def test_line_spans_use_document_offset():
    file_lines = ["header line %d" % i for i in range(9)] + ["alpha beta gamma", "", "delta epsilon", "zeta"]
    d = doc("\n".join(file_lines[9:]), line_start=10)
    chunks = Chunker(3).run(d)
    check_invariants(d, chunks, 3, file_lines=file_lines)
    assert [(c.text, c.line_start, c.line_end) for c in chunks] == [
        ("alpha beta gamma", 10, 10),
        ("delta epsilon\nzeta", 12, 13),
    ]  # 3 + 3 tokens


CODE = '''import os


def alpha(x):
    """Alpha."""
    return x + 1


@decorator
def beta(y):
    total = 0
    for i in range(y):
        total += i
    return total


class Gamma:
    def method(self):
        return os.getcwd()
'''


def test_code_prefers_top_level_definitions():
    d = doc(CODE, kind="code")
    chunks = Chunker(30).run(d)  # per-line tokens: 2,0,0,6,8,4,0,0,2,6,3,8,4,2,0,0,3,6,6
    check_invariants(d, chunks, 30)
    assert [c.text.split("\n")[0] for c in chunks] == ["import os", "@decorator", "class Gamma:"]
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 6), (9, 14), (17, 19)]


def test_code_splits_only_an_over_long_line():
    long_line = "values = [" + ", ".join(str(i) for i in range(60)) + "]"
    text = "a = 1\n" + long_line + "\nb = 2\n"
    d = doc(text, kind="code")
    chunks = Chunker(20).run(d)
    check_invariants(d, chunks, 20)
    assert chunks[0].text == "a = 1"  # short lines stay whole
    on_line_2 = [c for c in chunks if c.line_start == c.line_end == 2]
    assert len(on_line_2) >= 2  # the long line was cut
    assert "".join(c.text for c in chunks).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


def test_one_huge_line_is_bounded_in_tokens_and_characters():
    minified = "var a=" + ";".join(f"f{i}(x)" for i in range(20000)) + ";"  # ~100k tokens on one line
    blob = "x" * 50_000  # one token, no boundary at all
    for text, kind in ((minified, "code"), (blob, "text"), (blob, "code")):
        d = doc(text, kind=kind)
        chunks = Chunker(200).run(d)
        check_invariants(d, chunks, 200)
        assert max(len(c.text) for c in chunks) <= 200 * MAX_CHARS_PER_TOKEN
        assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_code_keeps_indentation_of_first_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(30))
    d = doc("def f():\n" + body + "\n", kind="code")
    chunks = Chunker(25).run(d)
    check_invariants(d, chunks, 25)
    assert chunks[1].text.startswith("    x")


def test_beir_records():
    short = doc("A short abstract.", kind="beir", line_start=None)
    chunks = Chunker(200).run(short)
    assert [(c.text, c.chunk_index, c.line_start, c.line_end) for c in chunks] == [("A short abstract.", 0, None, None)]
    long = doc(" ".join(f"Sentence number {i} is here." for i in range(100)), kind="beir", line_start=None)
    chunks = Chunker(50).run(long)
    assert len(chunks) > 1
    check_invariants(long, chunks, 50)


def _random_text(rng: random.Random) -> str:
    words = ["alpha", "beta", "x", "42", "def", "class", "#", "##", ",", ".", "!", "?", "(", ")", "caf\u00e9", "\t", "\x0c", "\r"]
    lines = []
    for _ in range(rng.randint(0, 40)):
        r = rng.random()
        if r < 0.2:
            lines.append(" " * rng.randint(0, 3))
        else:
            indent = "    " * rng.randint(0, 1) if r < 0.5 else ""
            lines.append(indent + " ".join(rng.choice(words) for _ in range(rng.randint(1, 60))))
    return "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")


@pytest.mark.parametrize("seed", range(40))
def test_random_documents_keep_invariants(seed):
    rng = random.Random(seed)
    text = _random_text(rng)
    kind = rng.choice(["text", "markdown", "code", "beir", "html"])
    line_start = None if kind in ("beir", "html") else rng.randint(1, 5)
    file_lines = None
    if line_start is not None:
        file_lines = ["(before)"] * (line_start - 1) + text.split("\n")
    budget = rng.choice([5, 17, 64, 200])
    d = doc(text, kind=kind, line_start=line_start)
    chunks = Chunker(budget).run(d)
    check_invariants(d, chunks, budget, file_lines=file_lines)
    stripped = re.sub(r"\s+", "", text)
    assert re.sub(r"\s+", "", "".join(c.text for c in chunks)) == stripped


def test_example_corpus_chunks_against_files():
    result = load_documents([REPO / "examples"])
    assert result.stats.documents >= 8
    chunker = Chunker(200)
    for d in result.documents:
        chunks = chunker.run(d)
        assert chunks, d.doc_id
        file_lines = None
        if d.line_start is not None:  # doc_id is the file's path from the cwd (or absolute)
            file_lines = Path(d.doc_id).read_text(encoding="utf-8").split("\n")
        check_invariants(d, chunks, 200, file_lines=file_lines)
