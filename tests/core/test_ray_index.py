"""Indexing on Ray (a local instance, 2 CPUs): the index equals the single-process one (same chunk ids, vectors to
float precision), for examples/ with the real MiniLM and for a 2,000-document SciFact slice with a hash encoder
(bounded: the real model on 2,000 abstracts twice would take minutes on 2 shared cores). Ray start-up is slow,
so one instance serves the module."""

from __future__ import annotations

import gzip
import itertools
import os
from pathlib import Path

import numpy as np
import pytest

# Ray's local-only mode: its processes bind the loopback address, not the machine's (read when ray is imported)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")

from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.index.building.ray_embed import RayEmbedStage  # noqa: E402
from ragsieve.tools.index.local.index import HybridIndex  # noqa: E402
from tests.core import test_stable_rows  # noqa: E402
from tests.core.test_stable_rows import HashEmbedder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl.gz"


@pytest.fixture(scope="module")
def local_ray():
    ray.cloudpickle.register_pickle_by_value(test_stable_rows)  # the workers cannot import tests/
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def contents(folder: Path, embedder=None):
    with HybridIndex.open(folder, embedder=embedder) as index:
        chunks = index.store.get_many(range(len(index)))
        return [(c.doc_id, c.chunk_index, c.text) for c in chunks], np.asarray(index.vectors)


def long_code_chunks(folder: Path, embedder) -> int:
    """How many code chunks of the index are longer than the encoder's window (their vectors are the mean of
    their windows, `tools/index/building/windows.py`, made by the driver rather than by the Ray actors)."""
    from ragsieve.tools.index.building.report import indexed_text
    from ragsieve.tools.index.building.windows import windowed_rows

    with HybridIndex.open(folder, embedder=embedder) as index:
        chunks = index.store.get_many(range(len(index)))
    return len(windowed_rows(embedder, chunks, [indexed_text(c, True, True) for c in chunks]))


def test_examples_on_ray_equal_the_single_process_index(local_ray, tmp_path, embedder, examples_index):
    stage = RayEmbedStage(actors=1, batch_size=16)  # one MiniLM actor: two would load the model twice
    builder = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False, ray=stage)
    report = builder.build([str(REPO / "examples")])
    windowed = long_code_chunks(tmp_path / "idx", embedder)  # code chunks over the window: embedded by the driver
    assert windowed > 0 and stage.stats["embedded"] == report.chunks_total - windowed
    assert builder.resumed_embeddings == report.chunks_total - windowed
    pages = sum(1 for d in contents(tmp_path / "idx", embedder)[0] if d[1] == 0 and d[0].endswith((".html", ".htm")))
    # loaded on Ray, and chunked there except HTML pages (cut by the driver after the site-title cleanup)
    assert stage.load_stats["documents"] == report.docs_added == stage.load_stats["prechunked"] + pages
    ids, vectors = contents(tmp_path / "idx", embedder)
    ref_ids, ref_vectors = contents(examples_index, embedder)
    assert ids == ref_ids
    assert np.allclose(vectors, ref_vectors, atol=1e-5)


@pytest.mark.skipif(not SCIFACT.is_file(), reason="../shared/data/scifact not beside the clone")
def test_a_2000_document_scifact_slice_on_ray_equals_the_single_process_index(local_ray, tmp_path):
    corpus = tmp_path / "scifact" / "corpus.jsonl"
    corpus.parent.mkdir()
    with gzip.open(SCIFACT, "rt", encoding="utf-8") as src:
        corpus.write_text("".join(itertools.islice(src, 2000)), encoding="utf-8")
    single = IndexBuilder(tmp_path / "single", embedder=HashEmbedder(), progress=False)
    single.build([corpus])
    stage = RayEmbedStage(actors=2, batch_size=128, make_embedder=HashEmbedder)
    on_ray = IndexBuilder(tmp_path / "ray", embedder=HashEmbedder(), progress=False, ray=stage)
    report = on_ray.build([corpus])
    assert report.chunks_total >= 2000 and stage.stats["embedded"] == report.chunks_total
    assert stage.load_stats["documents"] == stage.load_stats["prechunked"] == 2000  # loaded and chunked on Ray
    ids, vectors = contents(tmp_path / "ray", HashEmbedder())
    ref_ids, ref_vectors = contents(tmp_path / "single", HashEmbedder())
    assert ids == ref_ids and len({i[0] for i in ids}) == 2000
    assert np.allclose(vectors, ref_vectors, atol=1e-6)
    # resumable: an unchanged second run sends nothing to Ray
    again = RayEmbedStage(actors=1, make_embedder=HashEmbedder)
    IndexBuilder(tmp_path / "ray", embedder=HashEmbedder(), progress=False, ray=again).build([corpus])
    assert again.stats == {} or again.stats["texts"] == 0


def test_missing_ray_gives_a_clear_message(monkeypatch):
    import builtins

    from ragsieve.tools.errors import ModelUnavailableError
    from ragsieve.tools.index.building.ray_embed import import_ray

    real = builtins.__import__
    monkeypatch.setattr(
        builtins,
        "__import__",
        lambda name, *a, **kw: (_ for _ in ()).throw(ImportError(name)) if name.startswith("ray") else real(name, *a, **kw),
    )
    with pytest.raises(ModelUnavailableError, match=r"ragsieve\[ray\]"):
        import_ray()
