"""BM25: both engines equal the hand-written Lucene formula on a tiny corpus."""

import math

import pytest

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.search.bm25 import BM25Index, lucene_bm25_scores, lucene_idf, tokenize

CORPUS = [
    "The cat sat on the mat with another cat.",
    "Dogs chase cats in the garden.",
    "A dog sleeps; the garden is quiet and the dog dreams of running dogs.",
    "Quantum entanglement links distant particles.",
    "Cats and dogs: a study of garden pets, cats first.",
]
QUERIES = ["cat garden", "dogs running", "quantum particles dog", "cats cats", "nothing matches here"]


def test_tokenizer_lowercases_drops_stopwords_and_stems():
    assert tokenize("The Cats are RUNNING in the gardens") == ["cat", "run", "garden"]
    assert tokenize("The Cats are RUNNING", stem=False) == ["cats", "running"]


def test_lucene_formula_by_hand():
    # "quantum" occurs in 1 of 5 documents (document 3, 5 tokens, tf 1)
    docs = [tokenize(t) for t in CORPUS]
    avgdl = sum(map(len, docs)) / 5
    idf = math.log(1 + (5 - 1 + 0.5) / (1 + 0.5))
    assert lucene_idf(1, 5) == pytest.approx(idf)
    expected = idf * 1 / (1 + 0.9 * (1 - 0.4 + 0.4 * len(docs[3]) / avgdl))
    assert lucene_bm25_scores(docs, ["quantum"])[3] == pytest.approx(expected)
    assert lucene_bm25_scores(docs, ["quantum"])[0] == 0.0


@pytest.mark.parametrize("engine", ["bm25s", "rank_bm25"])
@pytest.mark.parametrize("k1,b", [(0.9, 0.4), (1.5, 0.75)])
def test_engines_equal_the_formula(engine, k1, b):
    index = BM25Index(engine, k1=k1, b=b).build(CORPUS)
    docs = [tokenize(t) for t in CORPUS]
    for q in QUERIES:
        expected = lucene_bm25_scores(docs, tokenize(q), k1=k1, b=b)
        assert index.scores(q).tolist() == pytest.approx(expected, abs=1e-6)


def test_engines_agree_and_search_returns_positive_best_first():
    a, b = BM25Index("bm25s").build(CORPUS), BM25Index("rank_bm25").build(CORPUS)
    for q in QUERIES:
        ha, hb = a.search(q, 3), b.search(q, 3)
        assert [r for r, _ in ha] == [r for r, _ in hb]
        assert [s for _, s in ha] == pytest.approx([s for _, s in hb], abs=1e-6)
        assert all(s > 0 for _, s in ha)
        assert [s for _, s in ha] == sorted((s for _, s in ha), reverse=True)
    assert a.search("nothing matches here", 5) == []
    assert [r for r, _ in a.search("cat", 10, rows=[1, 3, 4])] == [4, 1]


@pytest.mark.parametrize("engine", ["bm25s", "rank_bm25"])
def test_save_load_round_trip(tmp_path, engine):
    index = BM25Index(engine, k1=1.1, b=0.5, stem=False).build(CORPUS)
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert (loaded.engine.value, loaded.k1, loaded.b, loaded.stem) == (engine, 1.1, 0.5, False)
    for q in QUERIES:
        assert loaded.scores(q).tolist() == pytest.approx(index.scores(q).tolist())
    if engine == "rank_bm25":
        assert not list((tmp_path / "bm25").glob("*.pkl"))


def test_bad_settings_refused(tmp_path):
    with pytest.raises(UsageError, match="bm25s, rank_bm25"):
        BM25Index("bm99")
    with pytest.raises(UsageError):
        BM25Index(k1=0)
    with pytest.raises(UsageError):
        BM25Index(b=1.5)
    with pytest.raises(UsageError):
        BM25Index().build(["the and of", "a an"])
    with pytest.raises(IndexMissingError):
        BM25Index.load(tmp_path / "nothing")
