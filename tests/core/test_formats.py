"""PDF, DOCX, Jupyter notebooks and markdown front matter, each on a real file written by a real library."""

from __future__ import annotations

import json
from pathlib import Path

from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.ingest.loaders import load_documents


def make_pdf(path: Path, pages: list[str]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["pdf.fonttype"] = 42  # TrueType: the text is extractable
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for text in pages:
            fig = plt.figure(figsize=(8.5, 11))
            for i, line in enumerate(text.split("\n")):
                fig.text(0.08, 0.92 - 0.03 * i, line, fontsize=11)
            pdf.savefig(fig)
            plt.close(fig)
    return path


def test_pdf_pages_are_cited(tmp_path):
    pages = [
        "Lumen operations handbook",
        "Keys are rotated every ninety days by the admin.",
        "Backups run nightly at two o'clock.",
    ]
    (tmp_path / "docs").mkdir()
    make_pdf(tmp_path / "docs" / "handbook.pdf", pages)
    doc = load_documents([tmp_path / "docs"]).documents[0]
    assert doc.doc_id == "docs/handbook.pdf" and doc.line_start is None
    assert [label for _, label in doc.locators] == ["p. 1", "p. 2", "p. 3"]
    assert Chunker(200).run(doc)[0].symbol == "pp. 1-3"  # one chunk over three pages
    small = Chunker(8).run(doc)
    assert {c.symbol for c in small if "ninety" in c.text} == {"p. 2"}
    assert {c.symbol for c in small if "nightly" in c.text} == {"p. 3"}


def test_broken_and_empty_pdfs_are_skipped_with_a_reason(tmp_path):
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body")
    result = load_documents([tmp_path])
    assert result.documents == [] and result.stats.skipped_unreadable == 1
    assert "unreadable PDF" in result.stats.skipped[0][1]


def test_docx_headings_and_tables(tmp_path):
    import docx

    d = docx.Document()
    d.add_heading("Key rotation policy", level=1)
    d.add_paragraph("Rotate keys every ninety days.")
    d.add_heading("Exceptions", level=2)
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Team", "Interval"
    table.cell(1, 0).text, table.cell(1, 1).text = "Billing", "30 days"
    d.save(tmp_path / "policy.docx")
    doc = load_documents([tmp_path / "policy.docx"]).documents[0]
    assert doc.title == "Key rotation policy" and doc.kind == "markdown"
    assert "# Key rotation policy" in doc.text and "## Exceptions" in doc.text
    assert "Billing | 30 days" in doc.text
    (tmp_path / "fake.docx").write_bytes(b"PK\x03\x04 not really a zip")
    result = load_documents([tmp_path / "fake.docx"])
    assert result.documents == [] and "unreadable DOCX" in result.stats.skipped[0][1]


def test_notebook_cells(tmp_path):
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Churn analysis\n", "We load the events."]},
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "source": "events = load('events.jsonl')",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["HUGE OUTPUT " * 50]}],
            },
            {"cell_type": "raw", "metadata": {}, "source": "ignored raw cell"},
        ],
    }
    (tmp_path / "analysis.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    doc = load_documents([tmp_path / "analysis.ipynb"]).documents[0]
    assert doc.title == "Churn analysis" and "```python\nevents = load('events.jsonl')\n```" in doc.text
    assert "HUGE OUTPUT" not in doc.text and "ignored raw cell" not in doc.text
    assert [label for _, label in doc.locators] == ["cell 1", "cell 2"]
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    result = load_documents([tmp_path / "broken.ipynb"])
    assert result.documents == [] and "not a Jupyter notebook" in result.stats.skipped[0][1]


def test_markdown_front_matter(tmp_path):
    text = '---\ntitle: "Rotating keys"\ntags: [keys]\n---\n# Heading\n\nBody line.\n'
    (tmp_path / "page.md").write_text(text, encoding="utf-8")
    doc = load_documents([tmp_path / "page.md"]).documents[0]
    assert doc.title == "Rotating keys" and not doc.text.startswith("---") and "tags:" not in doc.text
    chunk = Chunker(200).run(doc)[0]
    assert chunk.line_start == 5  # the file's own line numbers: the heading is on line 5
