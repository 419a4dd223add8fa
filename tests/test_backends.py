"""The backend contract, run against both backends: the in-process `local` index and `milvus` (milvus-lite,
an embedded file: no server). Same rows, chunks, neighbours, vectors, dense results; BM25 and hybrid close."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve import Config, Orchestrator  # noqa: E402
from ragsieve.agent.llm.fake import FakeChat  # noqa: E402
from ragsieve.tools.index.backend import Backend, CorpusScores, IndexBackend, RoundTrips, ServerFusion  # noqa: E402
from ragsieve.tools.index.engines.open import open_index
from ragsieve.tools.index.local.index import HybridIndex  # noqa: E402
from ragsieve.tools.index.milvus.pointer import read_pointer  # noqa: E402
from ragsieve.tools.index.milvus.publish import publish  # noqa: E402

QUERIES = ["rotate the API key", "rate limits per plan", "webhook signing secret", "install the CLI",
           "retry failed events"]


@pytest.fixture(scope="module")
def milvus_index(examples_index, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("milvus") / "idx"
    shutil.copytree(examples_index, folder)
    publish(folder)
    return folder


@pytest.fixture(params=["local", "milvus"])
def index(request, examples_index, milvus_index):
    opened = open_index(examples_index if request.param == "local" else milvus_index)
    assert opened.backend is Backend(request.param)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def reference(examples_index):
    with HybridIndex.open(examples_index) as local:
        yield {"n": len(local), "chunks": local.store.get_many(range(len(local))),
               "vectors": np.asarray(local.vectors), "sparse": list(local.sparse_rows),
               "docs": local.store.documents()}


def test_each_backend_satisfies_the_index_protocol(index):
    """Every `IndexBackend` member is there at run time (mypy checks the types: tests/test_gates.py); the
    optional capabilities are exactly those the backend has."""
    assert isinstance(index, IndexBackend)
    local = index.backend is Backend.LOCAL
    assert isinstance(index, ServerFusion) is not local and isinstance(index, RoundTrips) is not local
    assert isinstance(index.bm25, CorpusScores) is local
    assert (index.symbols is None) is not local
    assert index.vectors is not None and len(index.vectors) == len(index)


def test_rows_chunks_documents(index, reference):
    n = reference["n"]
    assert len(index) == n == index.store.count()
    assert index.store.get_many([3, 0, 3]) == [reference["chunks"][3], reference["chunks"][0], reference["chunks"][3]]
    assert index.store.documents() == reference["docs"]
    doc = reference["chunks"][5].doc_id
    rows = index.store.doc_rows(doc)
    assert rows == [i for i, c in enumerate(reference["chunks"]) if c.doc_id == doc]
    assert rows == list(range(rows[0], rows[0] + len(rows)))  # a document's chunks are consecutive
    assert [c.chunk_index for c in index.store.chunks_of(doc)] == list(range(len(rows)))
    middle = rows[len(rows) // 2]
    assert index.store.neighbours(middle) == [r for r in (middle - 1, middle + 1) if r in rows]
    assert index.store.row_of_text(reference["chunks"][7].text) == 7
    assert index.store.row_of_text("no chunk has this text") is None
    assert sorted(index.sparse_rows) == sorted(reference["sparse"])


def test_vectors_and_dense_search(index, reference):
    assert np.allclose(index.vectors[[1, 4]], reference["vectors"][[1, 4]], atol=1e-6)
    assert np.allclose(index.vectors[2], reference["vectors"][2], atol=1e-6)
    assert np.allclose(index.vectors[3:9], reference["vectors"][3:9], atol=1e-6)  # block reads (conformal view)
    from ragsieve.tools.index.search.dense import corpus_similarities
    q0 = index.embed_query(QUERIES[0])
    assert np.allclose(corpus_similarities(index.vectors, q0, block=5), reference["vectors"] @ q0, atol=1e-5)
    q = index.embed_query(QUERIES[0])
    exact = np.argsort(-(reference["vectors"] @ q))[:10].tolist()
    assert [r for r, _ in index.dense.search(q, 10)] == exact  # FLAT inner product: exact in both
    sims = {r: float(reference["vectors"][r] @ q) for r in (2, 9, 11)}
    assert [r for r, _ in index.dense.search_rows(q, [2, 9, 11], 2)] == sorted(sims, key=lambda r: -sims[r])[:2]


def test_bm25_and_hybrid_agree_across_backends(index, examples_index):
    with HybridIndex.open(examples_index) as local:
        for query in QUERIES:
            mine = [r for r, _ in index.bm25.search(query, 10)]
            theirs = [r for r, _ in local.bm25.search(query, 10)]
            # the same tokens (analysed locally) and BM25 parameters; Milvus' document-length normalisation
            # differs slightly, so the order can differ below the top
            assert mine and len(set(mine[:5]) & set(theirs[:5])) >= 3, query
            assert set(mine) == set(theirs) or len(set(mine) & set(theirs)) >= 7, query
            restricted = index.bm25.search(query, 5, rows=theirs[:3])
            assert {r for r, _ in restricted} <= set(theirs[:3])
            full = dict(index.bm25.search(query, 10))
            scores = index.bm25.score_rows(query, mine[:3])
            assert np.allclose(scores, [full[r] for r in mine[:3]], rtol=0.05) and min(scores) > 0


def test_the_pipeline_runs_on_either_backend(index, examples_index, milvus_index):
    folder = examples_index if index.backend is Backend.LOCAL else milvus_index
    chat = FakeChat(default="Rotate it with `lumen keys rotate` [1].")
    with Orchestrator.open(folder, Config(), chat=chat) as orch:
        assert orch.index.backend is index.backend
        answer = orch.ask("How do I rotate the API key of a Lumen workspace?")
        assert answer.citations and {c.chunk_id for c in answer.citations} <= {h.chunk_id for h in answer.context}
        assert any("api-keys" in h.chunk_id for h in answer.context)
        agentic = orch.ask("How do I rotate the API key of a Lumen workspace?", plan="full")
        assert agentic.answer and agentic.trace[-1].step in ("answer", "validate")


def test_publish_adds_incrementally_and_a_rebuild_switches_and_drops_the_old_collection(milvus_index, embedder):
    from pymilvus import MilvusClient

    from ragsieve.tools.index.building.builder import IndexBuilder

    before = read_pointer(milvus_index)
    docs = milvus_index.parent / "extra"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nThe cafeteria opens at eight.\n", encoding="utf-8")
    IndexBuilder(milvus_index, embedder=embedder, progress=False).build([docs])
    added = publish(milvus_index)
    assert added["collection"] == before["collection"] and added["rows"] == before["rows"] + 1
    assert added["last_publish"] == {**added["last_publish"], "mode": "incremental", "rows_written": 1,
                                     "rows_retired": 0}
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
    return subprocess.run([sys.executable, "-m", "ragsieve", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_cli_index_with_milvus_then_ask_and_migrate(tmp_path):
    from stub_openai import StubOpenAI, ok

    repo = Path(__file__).resolve().parent.parent
    out = cli("index", str(repo / "examples"), "--index", str(tmp_path / "milvus-demo"), "--backend", "milvus",
              "--no-progress")
    assert out.returncode == 0 and "published" in out.stdout, out.stderr
    assert json.loads((tmp_path / "milvus-demo" / "milvus.json").read_text())["uri"] == "milvus.db"  # relative
    with StubOpenAI([ok("Use `lumen keys rotate` [1].")]) as upstream:
        out = cli("ask", "How do I rotate the API key?", "--index", str(tmp_path / "milvus-demo"), "--json",
                  env={"OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "k"})
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
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.milvus.schema import MILVUS_LITE_BM25

    k1, b = MILVUS_LITE_BM25
    folder = tmp_path / "idx"
    IndexBuilder(folder, embedder=embedder, progress=False, bm25_k1=k1, bm25_b=b,
                 bm25_identifiers=identifiers).build([Path(__file__).resolve().parent.parent / "examples"])
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
