"""The index backend contract as test mixins (haystack's `haystack/testing/document_store.py` pattern).

A backend is published from a local index folder (`ragsieve index` writes it; Milvus is built on it), so
the contract compares what the backend serves with the local index of the same folder (`backend.root`).
A new backend gets every check by subclassing `IndexBackendTests` (or only the mixins it meets) in a test
module and overriding one fixture, `backend`:

    class TestMyBackend(IndexBackendTests):
        @pytest.fixture
        def backend(self, examples_index):  # the suite's index of examples/ (tests/conftest.py)
            folder = publish_to_my_engine(examples_index)
            with open_index(folder) as index:
                yield index

The queries and the question below are about the repository's `examples/` corpus; a backend tested on
another corpus overrides the class attributes `queries`, `question`, `reply` and `answer_chunk` too.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from ragsieve.agent.config import Config
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.testing.fake_chat import FakeChat
from ragsieve.tools.index.backend import IndexBackend
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.index.search.dense import corpus_similarities
from ragsieve.tools.index.search.where import Where

QUERIES = ["rotate the API key", "rate limits per plan", "webhook signing secret", "install the CLI", "retry failed events"]


class BackendFixtures:
    """The fixture a subclass overrides (`backend`) and the local reference derived from it."""

    queries: list[str] = QUERIES
    question = "How do I rotate the API key of a Lumen workspace?"
    reply = "Rotate it with `lumen keys rotate` [1]."
    answer_chunk = "api-keys"  # a part of the chunk id the question's answer comes from

    @pytest.fixture
    def backend(self) -> Iterator[IndexBackend]:
        """The backend under test, opened over an index folder whose local generation is the reference."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the `backend` fixture (ragsieve.testing.backends says how)"
        )
        yield  # pragma: no cover

    @pytest.fixture
    def local(self, backend: IndexBackend) -> Iterator[HybridIndex]:
        """The local index of the folder the backend was published from: what it must serve."""
        with HybridIndex.open(backend.root) as index:
            yield index


class ProtocolTest(BackendFixtures):
    def test_backend_satisfies_the_index_protocol(self, backend: IndexBackend) -> None:
        """Every `IndexBackend` member is there at run time (mypy checks the types: tests/core/test_gates.py)."""
        assert isinstance(backend, IndexBackend)
        assert backend.vectors is not None and len(backend.vectors) == len(backend)


class RowsTest(BackendFixtures):
    def test_rows_chunks_documents(self, backend: IndexBackend, local: HybridIndex) -> None:
        n = len(local)
        chunks = local.store.get_many(range(n))
        assert len(backend) == n == backend.store.count()
        assert backend.store.get_many([3, 0, 3]) == [chunks[3], chunks[0], chunks[3]]
        assert backend.store.documents() == local.store.documents()
        doc = chunks[5].doc_id
        rows = backend.store.doc_rows(doc)
        assert rows == [i for i, c in enumerate(chunks) if c.doc_id == doc]
        assert rows == list(range(rows[0], rows[0] + len(rows)))  # a document's chunks are consecutive
        assert [c.chunk_index for c in backend.store.chunks_of(doc)] == list(range(len(rows)))
        middle = rows[len(rows) // 2]
        assert backend.store.neighbours(middle) == [r for r in (middle - 1, middle + 1) if r in rows]
        assert backend.store.row_of_text(chunks[7].text) == 7
        assert backend.store.row_of_text("no chunk has this text") is None
        assert sorted(backend.sparse_rows) == sorted(local.sparse_rows)


class VectorsTest(BackendFixtures):
    def test_vectors_and_dense_search(self, backend: IndexBackend, local: HybridIndex) -> None:
        """Stored vectors read back by row, list and block; dense search is exact (FLAT inner product)."""
        reference = np.asarray(local.vectors)
        vectors = backend.vectors
        assert vectors is not None
        assert np.allclose(vectors[[1, 4]], reference[[1, 4]], atol=1e-6)
        assert np.allclose(vectors[2], reference[2], atol=1e-6)
        assert np.allclose(vectors[3:9], reference[3:9], atol=1e-6)  # block reads (conformal view)
        q0 = backend.embed_query(self.queries[0])
        assert np.allclose(corpus_similarities(vectors, q0, block=5), reference @ q0, atol=1e-5)
        q = backend.embed_query(self.queries[0])
        exact = np.argsort(-(reference @ q))[:10].tolist()
        assert [r for r, _ in backend.dense.search(q, 10)] == exact  # FLAT inner product: exact in both
        sims = {r: float(reference[r] @ q) for r in (2, 9, 11)}
        assert [r for r, _ in backend.dense.search_rows(q, [2, 9, 11], 2)] == sorted(sims, key=lambda r: -sims[r])[:2]


class LexicalTest(BackendFixtures):
    def test_bm25_agrees_with_the_local_index(self, backend: IndexBackend, local: HybridIndex) -> None:
        for query in self.queries:
            mine = [r for r, _ in backend.bm25.search(query, 10)]
            theirs = [r for r, _ in local.bm25.search(query, 10)]
            # the same tokens (analysed locally) and BM25 parameters; an engine's document-length
            # normalisation may differ slightly (Milvus' does), so the order can differ below the top
            assert mine and len(set(mine[:5]) & set(theirs[:5])) >= 3, query
            assert set(mine) == set(theirs) or len(set(mine) & set(theirs)) >= 7, query
            restricted = backend.bm25.search(query, 5, rows=theirs[:3])
            assert {r for r, _ in restricted} <= set(theirs[:3])
            full = dict(backend.bm25.search(query, 10))
            scores = backend.bm25.score_rows(query, mine[:3])
            assert np.allclose(scores, [full[r] for r in mine[:3]], rtol=0.05) and min(scores) > 0


class FilterTest(BackendFixtures):
    def test_filters_select_the_rows_the_local_index_selects(self, backend: IndexBackend, local: HybridIndex) -> None:
        chunks = local.store.get_many(range(len(local)))
        prefix = chunks[0].source.rsplit("/", 1)[0] + "/"
        for where in (
            Where(path_prefix=prefix),
            Where(kind="markdown"),
            Where(language="python"),
            Where(source=chunks[-1].source),
        ):
            assert backend.filter_rows(where) == local.filter_rows(where), where
        source = chunks[-1].source
        hits = HybridRetriever(backend, where=Where(source=source)).run(self.queries[0], top_k=3)
        assert hits and {h.chunk.source for h in hits} == {source}


class PipelineTest(BackendFixtures):
    def test_the_pipeline_runs_on_the_backend(self, backend: IndexBackend) -> None:
        """`Orchestrator.open` on the folder finds this backend (ragsieve.tools.index.engines.open) and both plans run."""
        with Orchestrator.open(backend.root, Config(), chat=FakeChat(default=self.reply)) as orch:
            assert orch.index.backend is backend.backend
            answer = orch.ask(self.question)
            assert answer.citations and {c.chunk_id for c in answer.citations} <= {h.chunk_id for h in answer.context}
            assert any(self.answer_chunk in h.chunk_id for h in answer.context)
            agentic = orch.ask(self.question, plan="full")
            assert agentic.answer and agentic.trace[-1].step in ("answer", "validate")


class IndexBackendTests(ProtocolTest, RowsTest, VectorsTest, LexicalTest, FilterTest, PipelineTest):
    """The whole contract: subclass it and override `backend` (this module's docstring)."""
