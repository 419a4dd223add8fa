"""Any source: include/exclude and default excludes, stable ids, additive indexing, --sync, remove, search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.ingest.loaders import load_documents
from ragsieve.tools.ingest.selection import Selection


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def sphinx_site(root: Path) -> Path:
    write(
        root / "html" / "index.html",
        "<html><body><div role='main'><h1 id='top'>Docs</h1><p>Welcome to the "
        "documentation of the frobnicator.</p></div></body></html>",
    )
    write(root / "html" / "_sources" / "index.rst.txt", "Docs\n====\nWelcome")
    write(root / "html" / "genindex-A.html", "<html><body><h1>Index A</h1><p>frobnicate</p></body></html>")
    write(root / "html" / "_static" / "doctools.js", "function f(){return 1}")
    write(root / "html" / "searchindex.js", "Search.setIndex({})")
    write(root / "html" / "app.min.js", "var a=1")
    write(root / "package-lock.json", "{}")
    write(root / "html" / "vendor" / "lib.py", "def v(): pass\n")
    return root


def test_default_excludes_name_what_was_skipped(tmp_path):
    root = sphinx_site(tmp_path / "site")
    result = load_documents([root / "html"], selection=Selection())
    assert [d.doc_id for d in result.documents] == ["html/index.html"]
    reasons = {Path(p).name: r for p, r in result.stats.skipped}
    assert "build output" in reasons["_sources"] and "minified" in reasons["app.min.js"]
    assert "vendored" in reasons["vendor"]
    assert result.stats.skipped_excluded == 6  # _sources, _static, genindex, searchindex, min.js, vendor
    off = load_documents([root / "html"], selection=Selection(default_excludes=False))
    assert len(off.documents) > 3


def test_include_and_exclude_globs(tmp_path):
    root = sphinx_site(tmp_path / "site")
    only = load_documents([root / "html"], selection=Selection(include=["genindex*.html"]))
    assert [d.doc_id for d in only.documents] == ["html/genindex-A.html"]  # an include beats a default
    none = load_documents([root / "html"], selection=Selection(exclude=["*.html"]))
    assert none.documents == []


def test_ids_do_not_depend_on_the_working_directory(tmp_path, embedder, monkeypatch):
    docs = write(tmp_path / "proj" / "docs" / "a.md", "# A\n\nAlpha rotates keys.\n").parent
    write(docs / "b.md", "# B\n\nBeta bills.\n")
    monkeypatch.chdir(tmp_path)
    IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build([Path("proj/docs")])
    monkeypatch.chdir(tmp_path / "proj")
    report = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build([Path("docs")])
    assert (report.written, report.docs_unchanged, report.chunks_embedded) == (False, 2, 0)
    monkeypatch.chdir("/")
    report = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build([tmp_path / "proj" / "docs"])
    assert report.docs_unchanged == 2 and report.chunks_embedded == 0


def test_adding_paths_adds_removal_is_explicit(tmp_path, embedder):
    a = write(tmp_path / "src" / "a" / "one.md", "# One\n\nThe first document.\n").parent
    b = write(tmp_path / "src" / "b" / "two.md", "# Two\n\nThe second document.\n").parent
    build = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False)
    build.build([a])
    report = build.build([b])  # adds; a's document stays
    assert (report.docs_added, report.docs_removed, report.docs_kept, report.chunks_embedded) == (1, 0, 1, 1)
    (a / "one.md").unlink()
    write(a / "three.md", "# Three\n\nA third document.\n")
    report = build.build([a])  # in a path indexed now, a deleted file is removed; b's stays
    assert (report.docs_added, report.docs_removed, report.docs_kept) == (1, 1, 1)
    report = build.build([b], sync=True)  # --sync: exactly these paths
    assert (report.docs_removed, report.docs_kept) == (1, 0)
    with HybridIndex.open(tmp_path / "idx") as index:
        assert sorted(index.store.documents()) == ["b/two.md"]
    build.build([a])
    report = build.remove(["a"])
    assert report.docs_removed == 1 and report.chunks_embedded == 0
    with pytest.raises(UsageError, match="no indexed document matches"):
        build.remove(["nothing/here"])
    with pytest.raises(UsageError, match="every document"):
        build.remove(["b"])


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ragsieve", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def test_cli_index_summary_search_and_remove(tmp_path):
    root = sphinx_site(tmp_path / "site")
    filler = " ".join(f"Background sentence number {i} about the history of frobnication." for i in range(40))
    write(
        root / "html" / "howto.html",
        "<html><body><div role='navigation'>Previous topic | Next topic</div>"
        "<div class='body' role='main'>"
        f"<h1 id='howto'>How to frobnicate</h1><p>{filler}</p><section id='steps'>"
        "<h2>Steps<a class='headerlink' href='#steps'>\u00b6</a></h2>"
        "<p>Turn the frobnicator dial to eleven.</p>"
        f"<p>{filler.replace('Background', 'Safety')}</p></section></div>"
        "<div class='footer'>Copyright 2026. Show Source</div></body></html>",
    )
    out = cli("index", str(root / "html"), "--index", str(tmp_path / "idx"), "--base-url", "https://docs.example/")
    assert out.returncode == 0, out.stderr
    assert "excluded: " in out.stdout and "default: build output" in out.stdout
    out = cli("search", "frobnicator dial", "--index", str(tmp_path / "idx"), "--top-k", "2", "--json")
    hits = json.loads(out.stdout)["hits"]
    assert hits[0]["label"] == "https://docs.example/howto.html#steps"
    assert hits[0]["text"].startswith("## Steps\n") and "\u00b6" not in hits[0]["text"]  # the section, heading kept
    assert all("Show Source" not in h["text"] and "Previous topic" not in h["text"] for h in hits)
    out = cli("search", "frobnicator", "--index", str(tmp_path / "idx"), "--top-k", "1")
    assert out.returncode == 0 and out.stdout.startswith("  1. https://docs.example/")
    out = cli("remove", "html/howto.html", "--index", str(tmp_path / "idx"))
    assert out.returncode == 0 and "1 removed" in out.stdout
    out = cli("search", "x", "--index", str(tmp_path / "nope"))
    assert out.returncode == 2 and "no index" in out.stderr.lower()


def test_a_killed_first_build_resumes_its_embeddings(tmp_path, embedder, monkeypatch):
    docs = tmp_path / "docs"
    for i in range(12):
        write(docs / f"d{i:02d}.md", f"# Doc {i}\n\nDocument number {i} talks about topic {i * 7}.\n")
    calls: list[int] = []
    real = embedder.embed

    def dying(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt  # the build is killed after its first batch
        return real(texts)

    monkeypatch.setattr(embedder, "embed", dying)
    progress: list[tuple[str, int, int]] = []
    builder = IndexBuilder(tmp_path / "idx", embedder=embedder, batch_size=1, progress=lambda *a: progress.append(a))
    with pytest.raises(KeyboardInterrupt):
        builder.build([docs])
    assert progress[:2] == [
        ("embedding", 0, 12),
        ("embedding", 4, 12),
    ]  # one batch of 4 done and reported  # 4 chunks (one batch) done and reported
    monkeypatch.setattr(embedder, "embed", real)
    calls.clear()
    embedded: list[int] = []
    monkeypatch.setattr(embedder, "embed", lambda texts: embedded.append(len(texts)) or real(texts))
    report = builder.build([docs])
    assert report.written and sum(embedded) == 8 and builder.resumed_embeddings == 4  # only the rest
    with HybridIndex.open(tmp_path / "idx") as index:
        assert len(index) == 12
