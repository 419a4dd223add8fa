"""ragsieve.tools.filters.rerank: the FlashRank path (with a stand-in Ranker), the explicit embedding fallback, logging."""

from __future__ import annotations

import logging

import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.rerank import Reranker, RerankMethod
from ragsieve.tools.types import Chunk, Hit


def hits():
    texts = ["cats sleep a lot", "the api key rotates daily", "dogs bark", "keys expire after a day"]
    dense = [0.1, 0.9, None, 0.5]
    return [
        Hit(chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=t, source="s"), row=i, score=1.0, rank=i + 1, dense_score=d)
        for i, (t, d) in enumerate(zip(texts, dense))
    ]


def test_invalid_model_name_is_refused_with_the_valid_ones():
    with pytest.raises(UsageError, match="ms-marco-TinyBERT-L-2-v2"):
        Reranker("no-such-model")
    with pytest.raises(UsageError, match="max_length"):
        Reranker(max_length=3)


def test_offline_uncached_model_orders_by_embedding_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = Reranker(cache_dir=tmp_path).run("api key", hits())
    assert result.method is RerankMethod.EMBEDDING
    assert "unavailable" in result.note and "HF_HUB_OFFLINE" in result.note
    assert "1 hit(s) without dense_score placed last" in result.note
    assert [h.chunk_id for h in result.hits] == ["d1#0", "d3#0", "d0#0", "d2#0"]
    assert [h.rank for h in result.hits] == [1, 2, 3, 4]
    assert result.hits[0].extra["rerank_score"] == pytest.approx(0.9)
    assert "rerank_score" not in result.hits[3].extra


def test_real_flashrank_download_failure_falls_back_without_touching_root_logging(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    reranker = Reranker(cache_dir=tmp_path / "fr", allow_download=True)
    result = reranker.run("api key", hits())  # no network here: flashrank's download fails
    assert result.method is RerankMethod.EMBEDDING and "unavailable" in result.note
    assert root.handlers == handlers and root.level == level
    # the failure is remembered: a second call does not retry the download
    assert reranker.run("api key", hits()).note == result.note


class FakeRanker:
    """Stands in for flashrank.Ranker: same constructor, same rerank contract, same basicConfig habit."""

    made: list[dict] = []

    def __init__(self, model_name, cache_dir, max_length=512, log_level="INFO"):
        logging.basicConfig(level=logging.INFO)
        FakeRanker.made.append({"model_name": model_name, "cache_dir": cache_dir, "max_length": max_length})

    def rerank(self, request):
        words = set(request.query.split())
        for p in request.passages:
            p["score"] = len(words & set(p["text"].split())) / 10
        return sorted(request.passages, key=lambda p: -p["score"])


def test_flashrank_path_scores_with_the_ranker(tmp_path, monkeypatch):
    import flashrank

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "ms-marco-MiniLM-L-12-v2").mkdir()
    (tmp_path / "ms-marco-MiniLM-L-12-v2" / "flashrank-MiniLM-L-12-v2_Q.onnx").write_bytes(b"cached")
    monkeypatch.setattr(flashrank, "Ranker", FakeRanker)
    FakeRanker.made.clear()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    reranker = Reranker("ms-marco-MiniLM-L-12-v2", cache_dir=tmp_path)
    result = reranker.run("keys expire day", hits())
    assert root.handlers == handlers and root.level == level  # basicConfig was a no-op
    assert FakeRanker.made == [{"model_name": "ms-marco-MiniLM-L-12-v2", "cache_dir": str(tmp_path), "max_length": 512}]
    assert result.method is RerankMethod.FLASHRANK and result.note == "flashrank ms-marco-MiniLM-L-12-v2"
    assert result.hits[0].chunk_id == "d3#0" and result.hits[0].extra["rerank_score"] == pytest.approx(0.3)
    assert [h.rank for h in result.hits] == [1, 2, 3, 4]
    reranker.run("dogs", hits())
    assert len(FakeRanker.made) == 1  # the model is loaded once
    assert reranker.run("q", []).hits == []


def test_no_download_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import flashrank

    def no_network(*a, **k):
        raise AssertionError("Ranker() was called: a download would have been attempted")

    monkeypatch.setattr(flashrank, "Ranker", no_network)
    result = Reranker(cache_dir=tmp_path / "fr").run("api key", hits())
    assert result.method is RerankMethod.EMBEDDING
    assert "no download attempted" in result.note and "rerank_download" in result.note
