"""Main-text extraction of HTML (trafilatura): boilerplate dropped, headings kept, chunks cite #anchors."""
from __future__ import annotations

from pathlib import Path

import pytest

from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.ingest.html_main import extract_main, heading_anchors
from ragsieve.tools.ingest.loaders import load_documents

pytest.importorskip("trafilatura")
SITE = Path(__file__).parent / "fixtures" / "site"
PYDOC = Path("/usr/share/doc/python3.11/html")
BOILERPLATE = ("Previous topic", "Show Source", "Copyright", "cookies", "Navigation")


def test_sphinx_like_page_keeps_main_text_and_headings_with_anchors():
    title, text, sections = extract_main((SITE / "guide.html").read_text(encoding="utf-8"))
    assert title == "Guide — Lumen docs"
    assert not any(b in text for b in BOILERPLATE), text
    assert "lumen keys rotate --grace 24h" in text and "Retry-After" in text
    assert [(a, h) for _, a, h in sections] == [("lumen-guide", "Lumen guide"), ("rotating-keys", "Rotating keys"),
                                                ("retry-policy", "Retry policy")]
    for offset, _, heading in sections:
        assert text[offset:].split("\n", 1)[0].lstrip("#").strip() == heading


def test_local_folder_chunks_start_at_headings_and_cite_anchor_or_base_url():
    result = load_documents([SITE])
    guide = next(d for d in result.documents if d.doc_id == "site/guide.html")
    chunks = Chunker(40).run(guide)
    assert {c.source for c in chunks} == {"site/guide.html#lumen-guide", "site/guide.html#rotating-keys",
                                          "site/guide.html#retry-policy"}
    retry = [c for c in chunks if c.source.endswith("#retry-policy")]
    assert retry[0].text.startswith("## Retry policy") and "Retry policy" in retry[-1].title
    assert all("Copyright" not in c.text for c in chunks)
    hosted = load_documents([SITE / "guide.html"], base_url="https://docs.example.com/lumen/")
    assert hosted.documents[0].source == "https://docs.example.com/lumen/guide.html"
    assert Chunker(40).run(hosted.documents[0])[-1].source == "https://docs.example.com/lumen/guide.html#retry-policy"


def test_headings_without_anchor_and_toc_backrefs():
    html = ('<html><body><section id="s1"><h1><a class="toc-backref" href="#id1">Alpha</a></h1>'
            '<p>text</p></section><h2 id="own">Beta</h2><div><h3>Gamma <code>x</code></h3></div></body></html>')
    title, found = heading_anchors(html)
    assert found == [("alpha", "s1"), ("beta", "own"), ("gamma x", None)]


@pytest.mark.skipif(not (PYDOC / "faq" / "design.html").is_file(), reason="Debian python3.11-doc not installed")
def test_real_python_docs_page():
    doc = load_documents([PYDOC / "faq" / "design.html"]).documents[0]
    chunks = Chunker(200).run(doc)
    assert not any(b in c.text for c in chunks for b in ("Previous topic", "Show Source", "Copyright"))
    assert any(c.source == "design.html#why-are-python-strings-immutable" for c in chunks)
    starts = sum(c.text.startswith("#") for c in chunks)
    assert starts >= len(doc.sections) - 2  # (nearly) every section starts a chunk
