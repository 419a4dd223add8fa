"""Indexing any source: ids relative to the indexed folder, additive builds, explicit removal, globs."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.builder import IndexBuilder, indexed_text
from ragsieve.tools.index.hybrid import HybridIndex
from ragsieve.tools.ingest.loaders import load_documents
from ragsieve.tools.ingest.path_filter import PathFilter, matches_any


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _ids(root):
    with HybridIndex.open(root) as index:
        return sorted(index.store.documents())


def test_additive_index_sync_and_remove(tmp_path, embedder):
    _write(tmp_path / "docs", {"a.md": "# A\n\nAlpha rotates keys.", "b.md": "# B\n\nBeta backs up.",
                               "old/c.md": "# C\n\nGamma bills."})
    _write(tmp_path / "notes", {"n.txt": "Notes about the pager rota."})
    index = tmp_path / "index"
    IndexBuilder(index, embedder=embedder, progress=False).build([tmp_path / "docs"])
    report = IndexBuilder(index, embedder=embedder, progress=False).build([tmp_path / "notes"])
    assert (report.docs_added, report.docs_removed, report.docs_unchanged, report.chunks_embedded) == (1, 0, 3, 1)
    assert _ids(index) == ["docs/a.md", "docs/b.md", "docs/old/c.md", "notes/n.txt"]
    (tmp_path / "docs" / "b.md").unlink()
    kept = IndexBuilder(index, embedder=embedder, progress=False).build([tmp_path / "docs"])
    assert not kept.written and "docs/b.md" in _ids(index)  # a vanished file leaves only with --sync
    synced = IndexBuilder(index, embedder=embedder, progress=False).build([tmp_path / "docs"], sync=True)
    assert (synced.docs_removed, synced.chunks_embedded) == (1, 0)
    assert _ids(index) == ["docs/a.md", "docs/old/c.md", "notes/n.txt"]
    removed = IndexBuilder(index, embedder=embedder, progress=False).build([], remove=["docs/old/"])
    assert removed.docs_removed == 1 and _ids(index) == ["docs/a.md", "notes/n.txt"]
    with pytest.raises(UsageError, match="nothing in index"):
        IndexBuilder(index, embedder=embedder, progress=False).build([], remove=["nope/"])
    with pytest.raises(UsageError, match="empty"):
        IndexBuilder(index, embedder=embedder, progress=False).build([], remove=["*"])


def test_ids_do_not_depend_on_the_working_directory(tmp_path, embedder, monkeypatch):
    _write(tmp_path / "repo", {"src/m.py": "def f():\n    return 1\n", "README.md": "# R\n\nread me"})
    index = tmp_path / "index"
    monkeypatch.chdir(tmp_path)
    IndexBuilder(index, embedder=embedder, progress=False).build(["repo"])
    monkeypatch.chdir(tmp_path / "repo" / "src")
    again = IndexBuilder(index, embedder=embedder, progress=False).build([os.path.join("..", "..", "repo")])
    assert not again.written and again.docs_unchanged == 2 and again.chunks_embedded == 0
    assert _ids(index) == ["repo/README.md", "repo/src/m.py"]


def test_default_excludes_include_exclude_and_summary(tmp_path):
    _write(tmp_path / "html", {
        "index.html": "<html><body><p>Home</p></body></html>",
        "genindex-A.html": "<p>index</p>", "_sources/index.rst.txt": "Home", "_static/doctools.js": "var a=1;",
        "searchindex.js": "Search.setIndex({})", "lib/app.min.js": "var b=2;", "lib/app.js": "var c = 3;",
        "package-lock.json": "{}", "guide/intro.html": "<p>Intro</p>",
    })
    result = load_documents([tmp_path / "html"], path_filter=PathFilter())
    assert sorted(d.doc_id for d in result.documents) == ["html/guide/intro.html", "html/index.html", "html/lib/app.js"]
    reasons = dict(result.stats.skipped)
    assert any("excluded by default '_sources/'" in r for r in reasons.values())
    assert result.stats.skipped_excluded == 6
    assert "excluded by default 'genindex*.html' (Sphinx general index)" in result.stats.summary()
    custom = load_documents([tmp_path / "html"], path_filter=PathFilter(include=["*.html", "*.min.js"],
                                                                        exclude=["guide/"]))
    assert sorted(d.doc_id for d in custom.documents) == ["html/genindex-A.html", "html/index.html",
                                                          "html/lib/app.min.js"]
    everything = load_documents([tmp_path / "html"], path_filter=PathFilter(use_defaults=False))
    assert len(everything.documents) == 8  # .json is not a supported type
    with pytest.raises(UsageError, match="invalid glob"):
        PathFilter(exclude=["!keep.md"])


def test_matches_any():
    assert matches_any("docs/a.md", ["docs/"]) and matches_any("docs/a.md", ["docs/a.md"])
    assert matches_any("docs/x/a.md", ["*.md"]) and not matches_any("docs2/a.md", ["docs/"])
    assert not matches_any("docs", ["docs/"])


class _DyingEmbedder:
    """The real embedder that dies (like a killed process) after `lives` calls, counting texts embedded."""

    def __init__(self, inner, lives: int) -> None:
        self.inner, self.lives, self.embedded = inner, lives, 0
        self.name, self.dimension = inner.name, inner.dimension

    def embed(self, texts):
        if self.lives == 0:
            raise KeyboardInterrupt
        self.lives -= 1
        self.embedded += len(texts)
        return self.inner.embed(texts)


def test_killed_first_build_resumes_embedding_from_the_checkpoint(tmp_path, embedder):
    _write(tmp_path / "docs", {f"d{i}.md": f"# Doc {i}\n\nDocument number {i} talks about topic {i * 7}."
                               for i in range(10)})
    index = tmp_path / "index"
    dying = _DyingEmbedder(embedder, lives=1)
    with pytest.raises(KeyboardInterrupt):
        IndexBuilder(index, embedder=dying, progress=False, batch_size=1).build([tmp_path / "docs"])
    assert dying.embedded == 4 and len(list((index / ".embed-checkpoint").glob("part-*.npz"))) == 1
    resumed = _DyingEmbedder(embedder, lives=-1)
    seen = []
    report = IndexBuilder(index, embedder=resumed, batch_size=1,
                          progress=lambda stage, done, total: seen.append((stage, done, total))).build(
        [tmp_path / "docs"])
    assert report.written and report.chunks_total == 10 and resumed.embedded == 6
    assert ("embedding", 4, 10) in seen and ("embedding", 10, 10) in seen and ("loading", -1, 10) in seen
    assert not (index / ".embed-checkpoint").exists()
    with HybridIndex.open(index) as built:  # resumed vectors are the vectors of their own rows
        fresh = embedder.embed([indexed_text(built.store.get(r)) for r in range(10)])
        assert np.allclose(np.asarray(built.vectors), fresh, atol=1e-5)


def test_line_progress_prints_rate_and_eta():
    import io

    from ragsieve.agent.cli.progress import LineProgress, eta_line

    clock = iter([0.0, 0.0, 5.0, 10.0, 20.0, 21.0])
    out = io.StringIO()
    progress = LineProgress(every_s=10, stream=out, clock=lambda: next(clock))
    for done in (0, 50, 100, 200):
        progress("embedding", done, 400)
    progress("embedding", -1, 400)
    lines = out.getvalue().splitlines()
    assert lines == ["embedding 0/400 (0.0%)", "embedding 200/400 (50.0%) 20.0/s, ETA 0m10s",
                     "embedding 200/400 (50.0%) 10.0/s, ETA 0m20s done"]  # 50 and 100 fell inside 10 s
    assert eta_line("loading", 0, 0, 1.0) == "loading 0/0"
