"""PDF, DOCX, Jupyter and Markdown front matter loaders, each on a real file written by the real library."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.ingest.loaders import load_documents

REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")


def _pdf(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_pdf import PdfPages
    import matplotlib.pyplot as plt

    with PdfPages(path, metadata={"Title": "Lumen operations manual"}) as pdf:
        for text in ("Page one explains how to rotate the signing key.",
                     "Page two explains how backups are restored from the cold bucket."):
            fig = plt.figure(figsize=(8.5, 11))
            fig.text(0.1, 0.8, text)
            pdf.savefig(fig)
            plt.close(fig)
    return path


def test_pdf_pages_are_cited(tmp_path):
    pytest.importorskip("pypdf")
    _pdf(tmp_path / "manual.pdf")
    doc = load_documents([tmp_path / "manual.pdf"]).documents[0]
    assert doc.title == "Lumen operations manual" and doc.line_start is None
    assert "rotate the signing key" in doc.text and "cold bucket" in doc.text
    chunks = Chunker(12).run(doc)
    by_page = {c.source: c.text for c in chunks}
    assert "cold bucket" in by_page["manual.pdf#page=2"] and "signing key" in by_page["manual.pdf#page=1"]
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    result = load_documents([tmp_path / "broken.pdf"])
    assert not result.documents and "unreadable pdf" in result.stats.skipped[0][1]


@pytest.mark.skipif(not REAL_PDF.is_file(), reason="libtasn1-doc not installed")
def test_real_published_pdf():
    pytest.importorskip("pypdf")
    doc = load_documents([REAL_PDF]).documents[0]
    assert len(doc.sections) > 10 and "ASN.1" in doc.text
    pages = {c.source.rsplit("#page=", 1)[1] for c in Chunker(200).run(doc)}
    assert len(pages) > 10


def test_docx_headings_paragraphs_tables(tmp_path):
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.core_properties.title = "Runbook"
    document.add_heading("Key rotation", level=1)
    document.add_paragraph("Rotate keys with the lumen CLI every ninety days.")
    document.add_heading("Contacts", level=2)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "team", "pager"
    table.cell(1, 0).text, table.cell(1, 1).text = "platform", "555-0100"
    document.save(tmp_path / "runbook.docx")
    doc = load_documents([tmp_path / "runbook.docx"]).documents[0]
    assert doc.title == "Runbook" and doc.kind == "markdown"
    assert doc.text.split("\n")[0] == "# Key rotation"
    assert "## Contacts" in doc.text and "platform | 555-0100" in doc.text
    template = Path(docx.__file__).parent / "templates" / "default.docx"  # shipped file, not made here
    assert load_documents([template]).stats.skipped_empty == 1  # an empty document is skipped, named


def test_notebook_cells_and_front_matter(tmp_path):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
          "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Key audit\n", "Find stale keys."]},
                    {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
                     "source": ["stale = [k for k in keys if k.age_days > 90]\n"]},
                    {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": []}]}
    (tmp_path / "audit.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (tmp_path / "bad.ipynb").write_text("{not json", encoding="utf-8")
    (tmp_path / "post.md").write_text("---\ntitle: \"Rotating keys\"\ntags: [ops]\n---\nFirst line.\n\nSecond.\n",
                                      encoding="utf-8")
    result = load_documents([tmp_path])
    docs = {d.doc_id.split("/", 1)[1]: d for d in result.documents}
    audit = docs["audit.ipynb"]
    assert audit.title == "Key audit" and "```python\nstale = [k" in audit.text
    assert [s[1] for s in audit.sections] == ["cell=1", "cell=2"]
    assert Chunker(8).run(audit)[-1].source.endswith("audit.ipynb#cell=2")
    post = docs["post.md"]
    assert post.title == "Rotating keys" and post.text.startswith("First line.") and post.line_start == 5
    chunk = Chunker(200).run(post)[0]
    assert (chunk.line_start, chunk.line_end) == (5, 7)
    assert any("bad.ipynb" in p and "not a Jupyter notebook" in r for p, r in result.stats.skipped)
