"""A build given some paths after the chunking settings changed refuses rather than dropping the documents
indexed from other paths (the previous listing guard never fired: no previous store was opened then)."""
from __future__ import annotations

import pytest

from ragsieve.tools.index.builder import IndexBuilder
from ragsieve.tools.index.hybrid import HybridIndex
from test_incremental import HashEmbedder, _write


def test_changed_chunking_settings_refuse_to_drop_documents_from_other_paths(tmp_path):
    """A build given one file after the chunking settings changed (here chunk_tokens; an index from before
    `header_words` is another case) must refuse, not publish an index of that file alone."""
    from ragsieve.tools.errors import UsageError

    docs, notes = tmp_path / "docs", tmp_path / "notes"
    _write(docs, 20)
    notes.mkdir()
    (notes / "n.md").write_text("a note\n")
    root = tmp_path / "index"
    IndexBuilder(root, embedder=HashEmbedder(), progress=False).build([docs, notes / "n.md"])
    (notes / "n.md").write_text("a note, edited\n")
    with pytest.raises(UsageError, match="20 documents indexed before are not in these paths"):
        IndexBuilder(root, chunk_tokens=120, embedder=HashEmbedder(), progress=False).build([notes / "n.md"])
    with HybridIndex.open(root, embedder=HashEmbedder()) as index:
        assert len(index) == 21  # nothing published
    report = IndexBuilder(root, chunk_tokens=120, embedder=HashEmbedder(), progress=False).build(
        [notes / "n.md"], sync=True)  # --sync: the user asked for only these paths
    assert report.chunks_total == 1
