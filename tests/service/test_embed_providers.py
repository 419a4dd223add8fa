"""The `openai` embedding provider against a fake endpoint on loopback: shapes, faults, and the index manifest.

Faults: 429 with Retry-After, 5xx, a timeout, a wrong dimension, NaN vectors,
too many inputs per request, inputs too long. Index: the provider, model and
dimension are recorded (never the key), queries are embedded by the same
endpoint, another provider/model/dimension is refused, and re-embedding happens
only on request (`rebuild=True` / `--rebuild`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragsieve.tools.errors import ModelEndpointError, UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.embedders import embedding_identity
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from tests.support.model_endpoints import FakeEmbeddings


def make(server, **kw) -> OpenAIEmbedder:
    waits = kw.pop("waits", [])
    kw = {"max_attempts": 3, "max_retry_s": 10.0, "timeout_s": 5.0} | kw
    return OpenAIEmbedder(server.base_url, "fake-embed", sleep=waits.append, **kw)


def test_vectors_are_unit_rows_in_input_order_and_the_request_is_openai_shaped(monkeypatch):
    monkeypatch.setenv("RAGSIEVE_EMBED_API_KEY", "sk-test-secret-123")
    with FakeEmbeddings(dimension=32) as server:
        emb = make(server, batch_size=2, dimensions=32)
        out = emb.embed(["api key rotation", "webhook signature", "api key rotation"])
        sent = server.requests[0]
    assert out.shape == (3, 32) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.allclose(out[0], out[2]) and not np.allclose(out[0], out[1])  # order kept though the reply was reversed
    assert sent["path"] == "/v1/embeddings" and sent["authorization"] == "Bearer sk-test-secret-123"
    assert sent["json"] == {
        "model": "fake-embed",
        "input": ["api key rotation", "webhook signature"],
        "encoding_format": "float",
        "dimensions": 32,
    }
    assert len(server.requests) == 2 and emb.dimension == 32
    assert "sk-test" not in json.dumps(emb.record())


def test_429_and_5xx_are_retried_honouring_retry_after():
    with FakeEmbeddings(dimension=8) as server:
        server.fault(429, headers={"Retry-After": "2"})
        server.fault(503)
        waits: list[float] = []
        out = make(server, waits=waits).embed(["one"])
    assert out.shape == (1, 8) and len(server.requests) == 3
    assert waits[0] == 2.0 and 0.0 <= waits[1] <= 1.0  # asked for, then full jitter under base * 2


def test_a_timeout_is_retried_then_the_failure_names_the_endpoint_and_limits():
    with FakeEmbeddings(dimension=8) as server:
        server.fault(200, {"data": []}, delay_s=3.0)
        assert make(server, timeout_s=0.5).embed(["x"]).shape == (1, 8)
        for _ in range(3):
            server.fault(500)
        with pytest.raises(
            ModelEndpointError,
            match=r"embeddings endpoint http://127\.0\.0\.1:\d+/v1/embeddings failed "
            r"after 3 attempt\(s\).*HTTP 500",
        ):
            make(server).embed(["x"])


def test_wrong_dimension_and_nan_vectors_are_refused():
    with FakeEmbeddings(dimension=8, reply_dimension=12) as server:
        with pytest.raises(ModelEndpointError, match="returned 12-d vectors; expected 8-d"):
            make(server, dimensions=8).embed(["x"])
        emb = make(server)
        emb.expect_dimension(8)  # the index holds 8-d vectors
        with pytest.raises(ModelEndpointError, match="expected 8-d"):
            emb.embed(["x"])
    with FakeEmbeddings(dimension=8, nan_at=1) as server:
        with pytest.raises(ModelEndpointError, match=r"non-finite values \(NaN or inf\) for 1 of 3 inputs \(first: input 1\)"):
            make(server).embed(["a", "b", "c"])


def test_too_many_inputs_split_the_batch_and_too_long_inputs_are_cut_and_counted():
    with FakeEmbeddings(dimension=8, max_inputs=3) as server:
        emb = make(server, batch_size=8)
        out = emb.embed([f"text {i}" for i in range(8)])
        assert out.shape == (8, 8) and emb.batch_size <= 3
        assert server.embedded_inputs() == 8 and [len(r["json"]["input"]) for r in server.requests] == [8, 4, 2, 2, 2, 2]
    with FakeEmbeddings(dimension=8, max_chars=40) as server:
        emb = make(server, max_input_tokens=10)  # cut to 30 characters before sending
        emb.embed(["short", "x" * 100])
        assert emb.inputs_cut == 1 and max(len(t) for t in server.requests[0]["json"]["input"]) == 30
        emb2 = make(server, max_input_tokens=None)
        emb2.embed(["y" * 100])  # the server says too long: cut in half until it fits (100 -> 50 -> 25)
        assert emb2.inputs_cut == 1 and len(server.requests[-1]["json"]["input"][0]) == 25


def test_bad_settings_are_refused():
    with pytest.raises(UsageError, match="needs a model name"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "")
    with pytest.raises(UsageError, match="expected an http"):
        OpenAIEmbedder("ftp://x", "m")
    with pytest.raises(UsageError, match="dimensions must be >= 1"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", dimensions=0)


def _docs(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keys.md").write_text("# Keys\n\nRotate the api key with lumen keys rotate; the old key expires in a day.\n")
    (docs / "hooks.md").write_text("# Webhooks\n\nEvery webhook carries a signature header computed with HMAC.\n")
    (docs / "tea.md").write_text("# Tea\n\nThe tea ceremony starts at four in the garden.\n")
    return docs


def test_index_records_the_provider_queries_use_it_and_a_mismatch_is_refused(tmp_path, monkeypatch, embedder):
    monkeypatch.setenv("RAGSIEVE_EMBED_API_KEY", "sk-secret-value-42")
    docs = _docs(tmp_path)
    folder = tmp_path / "index"
    with FakeEmbeddings(dimension=48) as server:
        report = IndexBuilder(folder, embedder=make(server), progress=False).build([str(docs)])
        assert report.chunks_embedded == 3
        manifest = json.loads((folder / (folder / "CURRENT").read_text().strip() / "manifest.json").read_text())
        record = manifest["embedding"]
        assert record | {"base_url": None} == {
            "provider": "openai",
            "model": "fake-embed",
            "dimension": 48,
            "encoder": "http",
            "base_url": None,
            "api_key_env": "RAGSIEVE_EMBED_API_KEY",
            "dimensions": None,
            "max_input_tokens": 8191,
        }
        assert record["base_url"] == server.base_url and "sk-secret" not in json.dumps(manifest)
        assert embedding_identity(record) == "openai:fake-embed:48"

        before = len(server.requests)
        with HybridIndex.open(folder) as idx:  # the query is embedded by the recorded endpoint
            hits = HybridRetriever(idx, bm25_weight=0.0, dense_weight=1.0).run("rotate the api key", top_k=1)
            assert hits[0].chunk.doc_id.endswith("keys.md")
        assert len(server.requests) == before + 1 and server.requests[-1]["json"]["input"] == ["rotate the api key"]

        again = IndexBuilder(folder, embedder=make(server), progress=False).build([str(docs)])
        assert not again.written and again.chunks_embedded == 0  # unchanged: nothing re-embedded
        with pytest.raises(UsageError, match=r"built with 'fake-embed' \(openai\), not 'other' \(openai\).*--rebuild"):
            IndexBuilder(folder, embedder=OpenAIEmbedder(server.base_url, "other"), progress=False).build([str(docs)])
        with pytest.raises(UsageError, match=r"not 'sentence-transformers/all-MiniLM-L6-v2' \(sentence-transformers\)"):
            IndexBuilder(folder, embedder=embedder, progress=False).build([str(docs)])
        with pytest.raises(UsageError, match="given embedder refused"):
            HybridIndex.open(folder, embedder=embedder)
        with pytest.raises(UsageError, match="holds 48-d vectors"):
            HybridIndex.open(folder, embedder=make(server, dimensions=16))
        requests = len(server.requests)
    switched = IndexBuilder(folder, embedder=embedder, progress=False).build([str(docs)], rebuild=True)
    assert switched.written and switched.chunks_embedded == 3  # re-embedded because it was asked for
    assert len(server.requests) == requests
    with HybridIndex.open(folder) as idx:
        assert idx.manifest["embedding"]["provider"] == "sentence-transformers"
        assert idx.manifest["embedding"]["dimension"] == 384


def test_cli_index_and_search_through_an_endpoint(tmp_path, capsys, monkeypatch):
    from ragsieve.cli.main import main

    docs = _docs(tmp_path)
    folder = tmp_path / "cli-index"
    with FakeEmbeddings(dimension=24) as server:
        assert (
            main(
                [
                    "index",
                    str(docs),
                    "--index",
                    str(folder),
                    "--embed-base-url",
                    server.base_url,
                    "--embed-model",
                    "fake-embed",
                    "--no-progress",
                ]
            )
            == 0
        )
        assert main(["search", "tea ceremony garden", "--index", str(folder), "--json"]) == 0
        embedded = server.embedded_inputs()
        assert main(["index", str(docs), "--index", str(folder), "--embed-model", "fake-embed", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "(sentence-transformers)" in err and "--rebuild" in err  # no base URL: another provider, refused
        assert (
            main(
                [
                    "index",
                    str(docs),
                    "--index",
                    str(folder),
                    "--embed-base-url",
                    server.base_url,
                    "--embed-model",
                    "fake-embed",
                    "--encoder",
                    "onnx",
                ]
            )
            == 2
        )
        assert "applies to local models only" in capsys.readouterr().err
    assert embedded == 1 + 3 + 1  # the dimension probe, three chunks, one query


def test_an_index_whose_endpoint_moved_is_reached_through_the_environment(tmp_path, monkeypatch):
    docs = _docs(tmp_path)
    folder = tmp_path / "moved"
    with FakeEmbeddings(dimension=16) as first:
        IndexBuilder(folder, embedder=make(first), progress=False).build([str(docs)])
    with FakeEmbeddings(dimension=16) as second:
        monkeypatch.setenv("RAGSIEVE_EMBED_BASE_URL", second.base_url)
        with HybridIndex.open(folder) as idx:
            assert idx.embed_query("tea").shape == (16,)
        assert len(second.requests) == 1


def test_serve_answers_from_an_endpoint_index_with_the_rerank_plan(tmp_path):
    """`serve` over the official openai SDK: the index embeds queries at its endpoint, `:fast+rerank` is offered
    because the configured /rerank endpoint is usable, and the plan runs it."""
    import openai

    from ragsieve.agent.config import Config, RerankConfig
    from tests.support.model_endpoints import FakeRerank
    from tests.support.service_fakes import served

    docs = _docs(tmp_path)
    folder = tmp_path / "served"
    with FakeEmbeddings(dimension=32) as emb, FakeRerank() as rr:
        IndexBuilder(folder, embedder=make(emb), progress=False).build([str(docs)])
        config = Config(rerank=RerankConfig(provider="http", base_url=rr.root, model="rr"))
        with served({"notes": folder}, config=config) as svc:
            client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
            assert "notes:fast+rerank" in [m.id for m in client.models.list()]
            reply = client.chat.completions.create(
                model="notes:fast+rerank", messages=[{"role": "user", "content": "rotate the api key"}]
            )
        ext = reply.model_extra["ragsieve"]
        assert [t["step"] for t in ext["trace"]] == ["retrieve", "rerank", "answer"]
        assert emb.requests[-1]["json"]["input"] == ["rotate the api key"]  # the query, embedded at the endpoint
        assert [r["json"]["query"] for r in rr.requests] == ["rotate the api key"]
        assert rr.requests[0]["json"]["model"] == "rr" and len(rr.requests[0]["json"]["documents"]) == 3


def test_the_build_report_counts_inputs_cut_to_the_model_limit(tmp_path):
    docs = _docs(tmp_path)
    with FakeEmbeddings(dimension=8) as server:
        emb = make(server, max_input_tokens=10)  # 30 characters: every chunk here is longer
        first = IndexBuilder(tmp_path / "cut", embedder=emb, progress=False).build([str(docs)])
        (docs / "more.md").write_text("# More\n\nshort\n")
        second = IndexBuilder(tmp_path / "cut", embedder=emb, progress=False).build([str(docs)])
    assert first.embed_inputs_cut == 3 and "3 inputs cut to the embedding model's limit" in first.summary()
    assert second.chunks_embedded == 1 and second.embed_inputs_cut == 0  # counted per build, not cumulatively
    assert all(len(t) <= 30 for r in server.requests for t in r["json"]["input"])
