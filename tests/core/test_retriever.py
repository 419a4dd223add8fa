"""HybridRetriever on a tiny real index (MiniLM + bm25s)."""

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.index.search.dense import l2_normalise

DOCS = [
    "Photosynthesis converts sunlight into chemical energy in green plants.",
    "The zorblax protocol authenticates clients with the token XQ42.",
    "Felines often nap through the afternoon on warm windowsills.",
    "Cat inventory: the cat list names every cat in the shelter catalogue.",
    "Quarterly revenue grew thanks to strong sales across Europe.",
    "Mitochondria produce ATP, the energy currency of the cell.",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("corpus")
    for i, text in enumerate(DOCS):
        (folder / f"d{i}.txt").write_text(text, encoding="utf-8")
    root = tmp_path_factory.mktemp("index")
    IndexBuilder(root, embedder=embedder, progress=False, index_titles=False).build([folder])
    with HybridIndex.open(root, embedder=embedder) as idx:
        yield idx


def test_hits_carry_component_scores_and_ranks(index):
    query = "where do cats sleep"
    hits = HybridRetriever(index).run(query, top_k=6)
    q = index.embed_query(query)
    bm25 = index.bm25.scores(query)
    bm25_list = [r for r, _ in index.bm25.search(query, 100)]
    dense_list = [r for r, _ in index.dense.search(q, 100)]
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1)) and len(hits) == 6
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for h in hits:
        assert h.chunk.text == DOCS[int(h.chunk.doc_id.rsplit("d", 1)[1][0])]
        assert h.dense_score == pytest.approx(float(index.vectors[h.row] @ q), abs=1e-5)
        assert h.bm25_score == pytest.approx(bm25[h.row])
        assert h.dense_rank == dense_list.index(h.row) + 1
        assert h.bm25_rank == (bm25_list.index(h.row) + 1 if h.row in bm25_list else None)
        expected = 1 / (60 + h.dense_rank) + (1 / (60 + h.bm25_rank) if h.bm25_rank else 0)
        assert h.score == pytest.approx(expected)
    assert {h.row for h in hits[:2]} == {2, 3}  # the semantic and the lexical match lead


def test_rows_restrict_both_retrievers(index):
    hits = HybridRetriever(index).run("cat energy", top_k=10, rows=[0, 4, 5])
    assert {h.row for h in hits} <= {0, 4, 5}
    assert HybridRetriever(index).run("cat", rows=[]) == []
    with pytest.raises(UsageError):
        HybridRetriever(index).run("cat", rows=[99])


def test_extra_texts_expand_the_query(index):
    ret = HybridRetriever(index)
    plain = [h.row for h in ret.run("energy", top_k=6)]
    expanded = ret.run("energy", top_k=6, extra_texts=[DOCS[4]])
    assert [h.row for h in expanded] != plain
    assert plain.index(4) > 0 and expanded[0].row == 4
    # a stored chunk text reuses its stored vector: (q + v4) / 2, normalised
    want = l2_normalise((index.embed_query("energy") + np.asarray(index.vectors[4])) / 2)
    assert ret.query_vector("energy", [DOCS[4]]) == pytest.approx(want, abs=1e-6)


def test_zero_weight_switches_a_retriever_off(index):
    query = "cat token"
    dense_only = HybridRetriever(index, bm25_weight=0.0).run(query, top_k=6)
    q = index.embed_query(query)
    assert [h.row for h in dense_only] == [r for r, _ in index.dense.search(q, 6)]
    assert all(h.bm25_rank is None for h in dense_only)
    bm25_only = HybridRetriever(index).run(query, top_k=6, weights=(1.0, 0.0))
    assert [h.row for h in bm25_only] == [r for r, _ in index.bm25.search(query, 6)]
    assert all(h.dense_rank is None and h.dense_score is not None for h in bm25_only)
    with pytest.raises(UsageError, match="both 0"):
        HybridRetriever(index, bm25_weight=0.0, dense_weight=0.0)
    with pytest.raises(UsageError):
        HybridRetriever(index).run(query, weights=(0.0, 0.0))


def test_weighted_fusion_and_weights_move_results(index):
    query = "cat sleeping"
    even = HybridRetriever(index, fusion="weighted").run(query, top_k=6)
    assert 0.0 <= even[-1].score <= even[0].score <= 1.0
    lexical = HybridRetriever(index, fusion="weighted", bm25_weight=5.0).run(query, top_k=1)
    semantic = HybridRetriever(index, fusion="weighted", dense_weight=5.0).run(query, top_k=1)
    assert lexical[0].row == 3 and semantic[0].row == 2


def test_settings_validated(index):
    for kwargs, match in (
        ({"fusion": "max"}, "rrf, weighted"),
        ({"rrf_k": 0}, "rrf_k"),
        ({"candidate_k": 0}, "candidate_k"),
        ({"bm25_weight": -1}, "bm25_weight"),
    ):
        with pytest.raises(UsageError, match=match):
            HybridRetriever(index, **kwargs)
    with pytest.raises(UsageError):
        HybridRetriever(index).run("   ")
    with pytest.raises(UsageError):
        HybridRetriever(index).run("cat", top_k=0)


def test_query_embeddings_are_remembered_and_returned_as_copies(index, monkeypatch):
    from ragsieve.tools.index.local import index as hybrid_index

    calls = []
    real = index.embedder.embed
    monkeypatch.setattr(index.embedder, "embed", lambda texts: calls.append(list(texts)) or real(texts))
    first = index.embed_query("a question never embedded before")
    first[:] = 0.0  # a caller mutating its copy must not poison the cache
    second = index.embed_query("a question never embedded before")
    assert calls == [["a question never embedded before"]]
    assert np.allclose(second, real(["a question never embedded before"])[0])
    for i in range(hybrid_index.QUERY_CACHE_SIZE):
        index.embed_query(f"filler {i}")
    index.embed_query("a question never embedded before")
    assert calls.count(["a question never embedded before"]) == 2  # evicted, embedded again
