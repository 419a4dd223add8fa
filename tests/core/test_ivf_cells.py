"""IVF cells kept with a local index (tools/index/sparse/cells.py): a change searches inside cells, not all rows.

The IVF threshold (`sparse.APPROXIMATE_ABOVE`, 50k rows) is lowered so that a 150-document corpus takes the
approximate path; with `ann.NPROBE` at or above the number of cells the search is exhaustive, so the entries an
incremental publish writes must equal an exact full build's; with few probes they must stay lower bounds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import ragsieve.tools.index.sparse.ann as ann
import ragsieve.tools.index.sparse.subset as sparse
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.segments import SegmentView
from tests.core.test_incremental import HashEmbedder, _results, _write

N = 150


def _build(root, paths, **kw):
    return IndexBuilder(root, embedder=HashEmbedder(), progress=False).build(paths, **kw)


def _view(root) -> tuple[SegmentView, dict]:
    gen = current_generation(root)
    manifest = read_manifest(gen)
    return SegmentView(gen, manifest["segments"], manifest["counts"]["chunks"]), manifest


def _changes(corpus):
    """Edit two documents, add one, remove three (rows move into the holes)."""
    _write(corpus, N, edits={3, 70})
    yield
    (corpus / "new.md").write_text("w1 w2 brand new document w3 edited\n")
    yield
    for i in (5, 6, 7):
        (corpus / f"d{i:05d}.md").unlink()
    yield


def _exact(view: SegmentView) -> np.ndarray:
    return sparse.nearest_neighbours(np.asarray(view.vectors), exact=True)[0]


@pytest.fixture
def approximate(monkeypatch):
    monkeypatch.setattr(sparse, "APPROXIMATE_ABOVE", 40)


def test_exhaustive_cells_give_the_exact_full_builds_entries_and_sparse_subset(tmp_path, approximate, monkeypatch):
    monkeypatch.setattr(ann, "NPROBE", 1000)  # every cell probed: the search is exact
    corpus = tmp_path / "docs"
    _write(corpus, N)
    _build(tmp_path / "inc", [corpus])
    view, _ = _view(tmp_path / "inc")
    assert view.cells() is not None and len(view.cells()[0]) == ann.default_nlist(N)
    for _ in _changes(corpus):
        report = _build(tmp_path / "inc", [corpus])
        assert report.chunks_embedded <= 2
        view, manifest = _view(tmp_path / "inc")
        assert len(manifest["segments"]) > 1 and view.segments[-1].cell is not None  # deltas carry cells
        centroids, cell = view.cells()
        v = np.asarray(view.vectors)
        assert (cell == ann.top_cells(v, centroids, 1)[:, 0]).all()  # each row in its nearest centroid's cell
        assert np.allclose(view.nearest()[0], _exact(view), atol=1e-6)
    _build(tmp_path / "full", [corpus], rebuild=True)
    full, _ = _view(tmp_path / "full")
    assert sorted(view.nearest()[0].round(5).tolist()) == sorted(full.nearest()[0].round(5).tolist())
    queries = ["w1 edited", "brand new document", "w3 w7"]
    a, sparse_a, _, _ = _results(tmp_path / "inc", queries)
    b, sparse_b, _, _ = _results(tmp_path / "full", queries)
    assert sparse_a == sparse_b
    assert {q: sorted(h[0] for h in a[q]) for q in queries} == {q: sorted(h[0] for h in b[q]) for q in queries}


def test_few_probes_keep_lower_bounds_and_search_only_the_probed_cells(tmp_path, approximate, monkeypatch):
    monkeypatch.setattr(ann, "NPROBE", 2)
    monkeypatch.setattr(ann, "REFINE_SHARE", 0.0)
    corpus = tmp_path / "docs"
    _write(corpus, N)
    _build(tmp_path / "inc", [corpus])
    (corpus / "new.md").write_text("w1 w2 brand new document w3 edited\n")
    _build(tmp_path / "inc", [corpus])
    view, manifest = _view(tmp_path / "inc")
    sim, row = view.nearest()
    exact = _exact(view)
    assert (sim <= exact + 1e-6).all()  # never above the exact similarity
    v = np.asarray(view.vectors)
    centroids, cell = view.cells()
    new = json.loads((current_generation(tmp_path / "inc") / "changes.json").read_text())["changed"]
    assert len(new) == 1
    r = new[0]
    probed = ann.top_cells(v[[r]], centroids, 2)[0]
    members = np.flatnonzero(np.isin(cell, probed) & (np.arange(len(v)) != r))
    s = v[members] @ v[r]
    assert row[r] == members[s.argmax()] and sim[r] == pytest.approx(float(s.max()), abs=1e-6)


def test_an_index_without_cells_gets_them_once_and_stays_readable(tmp_path, monkeypatch):
    corpus = tmp_path / "docs"
    _write(corpus, N)
    _build(tmp_path / "idx", [corpus])  # below the IVF size: exact, no cells (as an index built before)
    view, _ = _view(tmp_path / "idx")
    assert view.cells() is None
    monkeypatch.setattr(sparse, "APPROXIMATE_ABOVE", 40)
    _write(corpus, N, edits={9})
    report = _build(tmp_path / "idx", [corpus])
    assert "index upgraded once: IVF cells stored" in report.summary()
    view, manifest = _view(tmp_path / "idx")
    assert manifest["io"]["compacted"] and manifest["io"]["ivf_cells_added"]
    assert view.cells() is not None and len(manifest["segments"]) == 1
    assert np.allclose(view.nearest()[0], _exact(view), atol=1e-6)  # entries carried (exact) + exact for d9
    _write(corpus, N, edits={9, 10})
    assert "upgraded" not in _build(tmp_path / "idx", [corpus]).summary()
    view, manifest = _view(tmp_path / "idx")
    assert "ivf_cells_added" not in manifest["io"] and not manifest["io"]["compacted"]
    hits, _, _, _ = _results(tmp_path / "idx", ["w1 edited"])
    assert hits["w1 edited"]
