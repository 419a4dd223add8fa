"""Web pages chunked as a reader sees them (issue 44, item 5): tables as markdown tables, code blocks whole
(a block over the budget cut between lines, with its fence re-opened and closed in every piece), no raw
`######`, table-of-contents pages marked at ingest, deferred by the crawler and never ranked, and one hit
per page section. Pages: a Sphinx-like fixture (tests/fixtures/sphinx), the Python 3.11 `re` page
(tests/fixtures/pydocs) and, when Debian's python3.11-doc is installed, its library index."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from ragsieve.tools.filters.sections import one_per_section
from ragsieve.tools.ingest.chunking import Chunker, count_tokens
from ragsieve.tools.ingest.crawl.frontier import Frontier
from ragsieve.tools.ingest.pages import page_document
from ragsieve.tools.ingest.web_text import extract_page, is_toc_url
from ragsieve.tools.types import Chunk, Hit

FIXTURES = Path(__file__).parents[1] / "fixtures"
FROB = (FIXTURES / "sphinx" / "frob.html").read_text(encoding="utf-8")
TOC = (FIXTURES / "sphinx" / "index.html").read_text(encoding="utf-8")
DEBIAN_DOCS = Path("/usr/share/doc/python3.11/html")


def frob_chunks(budget: int = 200) -> list[Chunk]:
    doc = page_document("http://127.0.0.1/frob.html", FROB, "h")
    assert doc is not None and doc.kind == "markdown"
    return Chunker(budget).run(doc)


def test_a_table_is_one_chunk_of_markdown_rows():
    chunks = frob_chunks()
    tables = [c for c in chunks if "| Mode | Meaning |" in c.text]
    assert len(tables) == 1 and tables[0].symbol == "#modes"
    rows = [ln for ln in tables[0].text.split("\n") if ln.startswith("|")]
    assert rows == [
        "| Mode | Meaning |",
        "|---|---|",
        "| 'r' | read the file (the default) |",
        "| 'w' | write \\| truncate the file |",
        "| 'x' | exclusive creation |",
    ]
    for chunk in chunks:  # never a line that is only a cell separator
        assert not [ln for ln in chunk.text.split("\n") if re.fullmatch(r"\s*\|\s*", ln)]


def test_the_re_page_tables_are_tables():
    text = extract_page(gzip.open(FIXTURES / "pydocs" / "re.html.gz", "rt", encoding="utf-8").read()).text
    assert "| Context of reference to group “quote” | Ways to reference it |\n|---|---|\n" in text
    assert not [ln for ln in text.split("\n") if re.fullmatch(r"\s*\|\s*", ln)]


def test_a_code_block_within_the_budget_is_one_chunk():
    chunks = frob_chunks()
    spam = [c for c in chunks if "def spam(eggs):" in c.text]
    assert len(spam) == 1 and spam[0].symbol == "#frob.spam"
    assert (
        "```\ndef spam(eggs):\n    total = 0\n    for egg in eggs:\n        total += egg.weight\n    return total\n```"
    ) in spam[0].text


@pytest.mark.parametrize("budget", [60, 120, 200])
def test_a_long_code_block_is_cut_between_lines_with_balanced_fences(budget):
    chunks = frob_chunks(budget)
    for chunk in chunks:
        assert chunk.text.count("```") % 2 == 0, chunk.text
        assert count_tokens(chunk.text) <= budget
    pieces = [c for c in chunks if c.symbol == "#frob.table" and "rows.append" in c.text]
    assert len(pieces) >= 3
    lines = [ln for c in pieces for ln in c.text.split("\n") if ln.startswith(">>> rows.append")]
    assert lines == [
        f">>> rows.append({{'name': 'item{i}', 'size': {i * 7}, 'kind': 'widget'}})  # row {i}" for i in range(60)
    ]  # every line whole, in order, once
    assert all(c.text.startswith("```\n") for c in pieces[1:])  # re-opened where the cut fell in the block


def test_a_definition_is_inline_code_not_a_heading_mark():
    chunks = frob_chunks()
    spam = next(c for c in chunks if c.symbol == "#frob.spam")
    assert "`frob.spam(eggs)`" in spam.text and "######" not in "".join(c.text for c in chunks)


def test_a_toc_page_is_recognised():
    assert extract_page(TOC).toc and not extract_page(FROB).toc
    doc = page_document("http://127.0.0.1/index.html", TOC, "h")
    assert doc is not None and doc.kind == "toc"
    assert page_document("http://127.0.0.1/genindex-A.html", FROB, "h").kind == "toc"  # named as an index
    assert is_toc_url("http://h/py-modindex.html") and not is_toc_url("http://h/library/re.html")


@pytest.mark.skipif(not DEBIAN_DOCS.is_dir(), reason="Debian's python3.11-doc is not installed")
def test_debian_python_docs_toc_and_content_pages():
    for name in ("library/index.html", "library/text.html", "contents.html", "genindex-A.html"):
        assert extract_page((DEBIAN_DOCS / name).read_text(encoding="utf-8")).toc, name
    for name in ("library/re.html", "library/functions.html", "glossary.html", "library/intro.html"):
        assert not extract_page((DEBIAN_DOCS / name).read_text(encoding="utf-8")).toc, name


def test_the_crawler_fetches_index_pages_last():
    frontier = Frontier(["http://h/genindex.html", "http://h/a.html"])
    frontier.append("http://h/py-modindex.html")
    frontier.append("http://h/b.html")
    assert [frontier.popleft() for _ in range(len(frontier))] == [
        "http://h/a.html",
        "http://h/b.html",
        "http://h/genindex.html",
        "http://h/py-modindex.html",
    ]


def _hit(doc: str, symbol: str, kind: str = "markdown", index: int = 0) -> Hit:
    return Hit(chunk=Chunk(doc_id=doc, chunk_index=index, text="t", source=doc, kind=kind, symbol=symbol), row=index, score=1.0)


def test_one_hit_per_section_and_no_toc():
    hits = [
        _hit("p", "#a", index=0),
        _hit("p", "#a", index=1),
        _hit("t", "#top", "toc", 2),
        _hit("p", "#b", index=3),
        _hit("q", "#a", index=4),
        _hit("c", "f", "code", 5),
        _hit("c", "f", "code", 6),
    ]
    kept = one_per_section(hits)
    assert [h.row for h in kept] == [0, 3, 4, 5, 6]  # code is left to one_per_definition
    assert [h.row for h in one_per_section(hits, sections=False)] == [0, 1, 3, 4, 5, 6]
    assert [h.row for h in one_per_section(hits, keep_toc=True)] == [0, 2, 3, 4, 5, 6]


def test_ranking_keeps_one_chunk_per_section_and_skips_toc(tmp_path, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.index.query.retriever import HybridRetriever
    from ragsieve.tools.index.search.where import Where

    site = tmp_path / "site"
    site.mkdir()
    (site / "frob.html").write_text(FROB, encoding="utf-8")
    (site / "index.html").write_text(TOC, encoding="utf-8")
    IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False, chunk_tokens=60).build([site])
    with HybridIndex.open(tmp_path / "idx", embedder=embedder) as index:
        query = "rows append item widget size kind library part"
        hits = HybridRetriever(index).run(query, top_k=5)
        assert [h.chunk.symbol for h in hits].count("#frob.table") == 1
        assert all(h.chunk.kind != "toc" for h in hits)
        every = HybridRetriever(index, sections=False).run(query, top_k=5)
        assert [h.chunk.symbol for h in every].count("#frob.table") >= 3
        toc = HybridRetriever(index).with_filter(Where(kind="toc")).run("library part", top_k=3)
        assert toc and all(h.chunk.kind == "toc" for h in toc)  # asked for by kind: returned


def test_a_crawled_sphinx_site_indexes_tables_and_whole_code_and_fetches_index_pages_last(tmp_path, embedder):
    """The fixture pages served over loopback and crawled: the index page is fetched first (the start), a page
    named as an index last, and the index holds a table chunk, a whole code block and a `toc` page."""
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex
    from ragsieve.tools.ingest.crawl.crawler import Crawler
    from tests.core.test_crawler import serve

    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    (site / "docs" / "index.html").write_text(
        TOC.replace("lib0.html", "genindex.html").replace("lib1.html", "frob.html"), encoding="utf-8"
    )
    (site / "docs" / "frob.html").write_text(FROB, encoding="utf-8")
    (site / "docs" / "genindex.html").write_text(TOC, encoding="utf-8")
    (site / "docs" / "sitemap.xml").write_text("<urlset></urlset>", encoding="utf-8")
    with serve(site) as (origin, _):
        order: list[str] = []
        Crawler(
            origin + "/docs/index.html",
            state_dir=tmp_path / "state",
            rate=50,
            sleep=lambda s: None,
            workers=1,
            progress=lambda done, total, url: order.append(url.rsplit("/", 1)[-1]),
        ).run()
        assert order[0] == "index.html" and order.index("frob.html") < order.index("genindex.html")
        IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build(
            [origin + "/docs/index.html"], crawl={"rate": 50, "sleep": lambda s: None}
        )
    with HybridIndex.open(tmp_path / "idx") as index:
        chunks = index.store.get_many(range(len(index)))
    kinds = {c.source.rsplit("/", 1)[-1]: c.kind for c in chunks}
    assert kinds["index.html"] == "toc" and kinds["genindex.html"] == "toc" and kinds["frob.html"] == "markdown"
    texts = [c.text for c in chunks if c.source.endswith("frob.html")]
    assert any("| Mode | Meaning |\n|---|---|\n" in t for t in texts)
    assert any("```\ndef spam(eggs):" in t and "    return total\n```" in t for t in texts)
    assert all(t.count("```") % 2 == 0 for t in texts)


@pytest.mark.parametrize("seed", range(30))
def test_random_markdown_blocks_keep_balanced_fences_budget_and_text(seed):
    import random

    from ragsieve.tools.types import Document

    rng = random.Random(seed)
    words = ["alpha", "beta", "x", "(", ")", "=", "rows", "append", "gamma", "|", "delta"]
    parts: list[str] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.3:
            body = [
                " " * rng.choice([0, 4]) + " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
                for _ in range(rng.randint(1, 40))
            ]
            parts.append("```\n" + "\n".join(body) + "\n```")
        elif kind < 0.5:
            rows = ["| " + " | ".join(rng.choice(words[:5]) for _ in range(3)) + " |" for _ in range(rng.randint(1, 30))]
            parts.append("| a | b | c |\n|---|---|---|\n" + "\n".join(rows))
        elif kind < 0.6:
            parts.append("## " + " ".join(rng.choice(words) for _ in range(3)))
        else:
            parts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 80))))
    text = "\n\n".join(parts)
    budget = rng.choice([20, 40, 80, 200])
    doc = Document(doc_id="d", source="d", text=text, kind="markdown", line_start=None)
    chunks = Chunker(budget).run(doc)
    for chunk in chunks:
        assert chunk.text.count("```") % 2 == 0, chunk.text
        assert count_tokens(chunk.text) <= budget
    from ragsieve.tools.ingest.chunking import FENCE_RESERVE

    for block in parts:  # a code block or table that fits (with room for re-opened fences) is in one chunk
        if block.startswith(("```", "|")) and count_tokens(block) <= budget - FENCE_RESERVE:
            assert any(block in c.text for c in chunks), block
    kept = [ln for c in chunks for ln in c.text.split("\n") if ln.strip() and ln.strip() != "```"]
    original = [ln for ln in text.split("\n") if ln.strip() and ln.strip() != "```"]
    assert "".join(kept).replace(" ", "") == "".join(original).replace(" ", "")
