"""The backend contract (`ragsieve.testing.backends`), run against both backends: the in-process `local` index
and `milvus` (milvus-lite, an embedded file: no server). Same rows, chunks, neighbours, vectors, dense results;
BM25 and hybrid close. Then what only Milvus does: incremental publishes, the CLI, its BM25 parameters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragsieve.testing.backends import QUERIES, IndexBackendTests
from ragsieve.tools.index.backend import Backend, CorpusScores, IndexBackend, RoundTrips, ServerFusion
from ragsieve.tools.index.engines.open import open_index
from ragsieve.tools.index.local.index import HybridIndex


@pytest.fixture(scope="module")
def milvus_index(examples_index, tmp_path_factory) -> Path:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragsieve.tools.index.milvus.publish import publish

    folder = tmp_path_factory.mktemp("milvus") / "idx"
    shutil.copytree(examples_index, folder)
    publish(folder)
    return folder


class TestLocalBackend(IndexBackendTests):
    @pytest.fixture
    def backend(self, examples_index) -> Iterator[IndexBackend]:
        with open_index(examples_index) as opened:
            assert opened.backend is Backend.LOCAL
            yield opened

    def test_local_capabilities(self, backend):
        """The optional capabilities are exactly those the local backend has."""
        assert not isinstance(backend, ServerFusion) and not isinstance(backend, RoundTrips)
        assert isinstance(backend.bm25, CorpusScores)
        assert backend.symbols is not None

    def test_the_reference_is_the_examples_index(self, backend, examples_index):
        assert backend.root == examples_index


class TestMilvusBackend(IndexBackendTests):
    @pytest.fixture
    def backend(self, milvus_index) -> Iterator[IndexBackend]:
        with open_index(milvus_index) as opened:
            assert opened.backend is Backend.MILVUS
            yield opened

    def test_milvus_capabilities(self, backend):
        """The optional capabilities are exactly those the Milvus backend has."""
        assert isinstance(backend, ServerFusion) and isinstance(backend, RoundTrips)
        assert not isinstance(backend.bm25, CorpusScores)
        assert backend.symbols is None

    def test_milvus_serves_what_the_examples_index_holds(self, backend, examples_index):
        """The reference (`backend.root`'s local generation) is the examples index it was copied from."""
        with HybridIndex.open(examples_index) as source:
            assert len(backend) == len(source)
            assert backend.store.get_many(range(len(source))) == source.store.get_many(range(len(source)))
            assert np.allclose(np.asarray(backend.vectors[list(range(len(source)))]), np.asarray(source.vectors), atol=1e-6)


def test_publish_adds_incrementally_and_a_rebuild_switches_and_drops_the_old_collection(milvus_index, embedder):
    from pymilvus import MilvusClient

    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.milvus.pointer import read_pointer
    from ragsieve.tools.index.milvus.publish import publish

    before = read_pointer(milvus_index)
    docs = milvus_index.parent / "extra"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nThe cafeteria opens at eight.\n", encoding="utf-8")
    IndexBuilder(milvus_index, embedder=embedder, progress=False).build([docs])
    added = publish(milvus_index)
    assert added["collection"] == before["collection"] and added["rows"] == before["rows"] + 1
    assert added["last_publish"] == {**added["last_publish"], "mode": "incremental", "rows_written": 1, "rows_retired": 0}
    after = publish(milvus_index, rebuild=True)  # the full-copy path: a new collection, the alias moved
    assert after["collection"] != before["collection"] and after["rows"] == before["rows"] + 1
    client = MilvusClient(str(milvus_index / after["uri"]))
    try:
        assert client.has_collection(after["collection"]) and not client.has_collection(before["collection"])
        assert client.describe_alias(after["alias"])["collection_name"] == after["collection"]
    finally:
        client.close()
    with open_index(milvus_index) as index:
        assert any("cafeteria" in c.text for c in index.store.get_many(range(len(index))))


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "ragsieve", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


def test_cli_index_with_milvus_then_ask_and_migrate(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from tests.support.stub_openai import StubOpenAI, ok

    repo = Path(__file__).resolve().parents[2]
    out = cli("index", str(repo / "examples"), "--index", str(tmp_path / "milvus-demo"), "--backend", "milvus", "--no-progress")
    assert out.returncode == 0 and "published" in out.stdout, out.stderr
    assert json.loads((tmp_path / "milvus-demo" / "milvus.json").read_text())["uri"] == "milvus.db"  # relative
    with StubOpenAI([ok("Use `lumen keys rotate` [1].")]) as upstream:
        out = cli(
            "ask",
            "How do I rotate the API key?",
            "--index",
            str(tmp_path / "milvus-demo"),
            "--json",
            env={"OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "k"},
        )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["citations"][0]["source"].startswith("examples/")
    out = cli("migrate", "--to", "local", "--index", str(tmp_path / "milvus-demo"))
    assert out.returncode == 0 and not (tmp_path / "milvus-demo" / "milvus.json").exists()
    out = cli("migrate", "--to", "milvus", "--index", str(tmp_path / "milvus-demo"))
    assert out.returncode == 0 and "no re-embedding" in out.stdout


@pytest.mark.parametrize("identifiers", [True, False])
def test_milvus_bm25_is_the_local_bm25_when_the_engine_uses_the_same_k1_and_b(tmp_path, embedder, identifiers):
    """Same analysed tokens, same Lucene BM25: with the local index built with milvus-lite's fixed k1/b the
    rankings are identical and the scores equal (Milvus keeps the (k1 + 1) factor the local scores drop).
    With identifier terms (the default) the published text holds them too, dotted ones kept whole through
    Milvus' `standard` tokenizer (milvus_schema.analysed), and identifier queries rank alike."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.milvus.publish import publish
    from ragsieve.tools.index.milvus.schema import MILVUS_LITE_BM25

    k1, b = MILVUS_LITE_BM25
    folder = tmp_path / "idx"
    IndexBuilder(folder, embedder=embedder, progress=False, bm25_k1=k1, bm25_b=b, bm25_identifiers=identifiers).build(
        [Path(__file__).resolve().parents[2] / "examples"]
    )
    queries = QUERIES + ["rotate_key", "self.max_retries", "urllib.request retry", "LumenClient", "err.code"]
    with HybridIndex.open(folder) as local:
        reference = {q: local.bm25.search(q, 10) for q in queries}
        assert local.manifest["bm25"]["identifiers"] is identifiers
    pointer = publish(folder)
    assert pointer["bm25"]["k1"] == k1 and pointer["bm25_input"] == "pretokenized"
    assert pointer["bm25"]["identifiers"] is identifiers
    with open_index(folder) as remote:
        for query, theirs in reference.items():
            mine = remote.bm25.search(query, 10)
            assert [r for r, _ in mine] == [r for r, _ in theirs], query
            assert np.allclose([s for _, s in mine], [(k1 + 1) * s for _, s in theirs], rtol=1e-4), query
