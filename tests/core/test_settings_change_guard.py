"""A build given some paths after the chunking settings changed refuses rather than dropping the documents
indexed from other paths (the previous listing guard never fired: no previous store was opened then)."""

from __future__ import annotations

import pytest

from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex
from tests.core.test_incremental import HashEmbedder, _write


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
        [notes / "n.md"], sync=True
    )  # --sync: the user asked for only these paths
    assert report.chunks_total == 1


def test_an_index_from_before_header_words_keeps_its_text_on_a_one_file_change(tmp_path):
    """An index whose manifest predates `header_words` is not a changed setting: a one-file build updates that
    file (no refusal, no re-embedding of the rest) with the headers the index was built with; a new index
    spells the names."""
    import json

    from ragsieve.tools.index.local.generations import MANIFEST, current_generation
    from tests.core.test_incremental import HashEmbedder as Hash

    class Recording(Hash):
        def __init__(self):
            self.texts = []

        def embed(self, texts, progress=False):
            self.texts.extend(texts)
            return super().embed(texts, progress)

    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"m{i}.py").write_text(f"def parse_header_line_{i}(line):\n    return line.split(':', 1)\n")
    root = tmp_path / "index"
    first = Recording()
    IndexBuilder(root, embedder=first, progress=False).build([src])
    assert any("parse header line" in t for t in first.texts)  # a new index spells the names
    manifest = current_generation(root) / MANIFEST
    data = json.loads(manifest.read_text())
    del data["settings"]["chunking"]["header_words"]  # as written before the setting existed
    manifest.write_text(json.dumps(data))
    (src / "m1.py").write_text("def parse_header_line_1(line):\n    return line.partition(':')\n")
    again = Recording()
    report = IndexBuilder(root, embedder=again, progress=False).build([src / "m1.py"])
    assert report.docs_updated == 1 and report.chunks_total == 3
    assert again.texts and all("parse header line" not in t for t in again.texts)
    assert "header_words" not in json.loads((current_generation(root) / MANIFEST).read_text())["settings"]["chunking"]
