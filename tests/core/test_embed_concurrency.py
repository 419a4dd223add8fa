"""An embeddings endpoint driven with several requests in flight (issue 47), against the fake server on loopback:
the vectors come back in input order, the limit is honoured (the fake counts the requests it answers at once,
and holds the first ones until that many arrived, so no timing is assumed), a 5xx mid-stream is retried, the
413 split still applies, and a killed build resumes from its checkpoint; the build summary gives the rate."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.tools.errors import ModelEndpointError, UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder
from ragsieve.tools.index.local.index import HybridIndex
from tests.support.model_endpoints import FakeEmbeddings

TEXTS = [f"text number {i} about topic {i % 7} and word{i}" for i in range(40)]


def make(server, **kw) -> OpenAIEmbedder:
    waits = kw.pop("waits", [])
    kw = {"max_attempts": 3, "max_retry_s": 10.0, "timeout_s": 20.0} | kw
    return OpenAIEmbedder(server.base_url, "fake-embed", sleep=waits.append, **kw)


def test_four_in_flight_keep_the_order_and_the_limit():
    with FakeEmbeddings(dimension=16) as server:
        serial = make(server, batch_size=2).embed(TEXTS)
        assert server.peak_in_flight == 1
    with FakeEmbeddings(dimension=16, gate=4) as server:
        emb = make(server, batch_size=2, concurrency=4)
        out = emb.embed(TEXTS)
        peak = server.peak_in_flight
        sent = [t for r in server.requests for t in r["json"]["input"]]
    assert np.array_equal(out, serial)  # input order, whatever order the replies came in
    assert peak == 4 and emb.stats.peak_in_flight == 4  # the gate held 4 at once; never more than the limit
    assert sorted(sent) == sorted(TEXTS) and len(server.requests) == 20
    assert emb.stats.requests == 20 and emb.stats.texts == 40 and emb.stats.rate > 0
    assert emb.placement.endswith("(4 in flight)")


def test_a_5xx_mid_stream_is_retried_and_the_order_kept():
    with FakeEmbeddings(dimension=16) as server:
        serial = make(server, batch_size=4).embed(TEXTS)
    with FakeEmbeddings(dimension=16, fail_requests={5, 6}) as server:
        waits: list[float] = []
        out = make(server, batch_size=4, concurrency=3, waits=waits).embed(TEXTS)
        requests = len(server.requests)
    assert np.array_equal(out, serial) and requests == 12 and len(waits) == 2  # 10 batches, 2 retried


def test_the_413_split_applies_to_every_request_in_flight():
    with FakeEmbeddings(dimension=16, max_inputs=3) as server:
        emb = make(server, batch_size=8, concurrency=3)
        out = emb.embed(TEXTS)
        refused = sum(1 for r in server.requests if len(r["json"]["input"]) > 3)
    with FakeEmbeddings(dimension=16) as server:
        serial = make(server, batch_size=2).embed(TEXTS)
    assert np.array_equal(out, serial) and emb.batch_size <= 3
    assert refused <= 3 * 2  # only batches already cut before a request learnt the size were refused


def test_a_bad_concurrency_is_refused():
    with pytest.raises(UsageError, match="1..64"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", concurrency=0)


def _docs(tmp_path, n=24):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(n):
        (folder / f"d{i:02d}.md").write_text(
            f"# Doc {i}\n\nDocument {i} talks about topic {i * 7} and cells.\n", encoding="utf-8"
        )
    return folder


def test_a_killed_concurrent_build_resumes_from_its_checkpoint(tmp_path):
    docs = _docs(tmp_path)
    with FakeEmbeddings(dimension=16, max_requests=9) as server:  # then 503 for ever: the endpoint died
        emb = make(server, batch_size=2, concurrency=2, max_attempts=2)
        with pytest.raises(ModelEndpointError):
            IndexBuilder(tmp_path / "idx", embedder=emb, batch_size=2, progress=False).build([docs])
        first = server.embedded_inputs()
    assert first == 1 + 16  # the dimension probe, then one checkpointed step: 4 batches of 2 per request in flight
    with FakeEmbeddings(dimension=16) as server:
        emb = make(server, batch_size=2, concurrency=2)
        builder = IndexBuilder(tmp_path / "idx", embedder=emb, batch_size=2, progress=False)
        report = builder.build([docs])
        again = server.embedded_inputs()
    assert again == 1 + 24 - 16 and builder.resumed_embeddings == 16  # the probe, and what the checkpoint lacked
    assert report.chunks_total == 24 and f"embedded by endpoint {server.base_url}" in report.summary()
    assert "(2 in flight) at" in report.summary() and report.embed_rate > 0 and report.encoder_busy is None
    with FakeEmbeddings(dimension=16) as server:
        ref = IndexBuilder(tmp_path / "ref", embedder=make(server, batch_size=2), batch_size=2, progress=False).build([docs])
    assert ref.chunks_total == 24
    with HybridIndex.open(tmp_path / "idx", embedder=emb) as a, HybridIndex.open(tmp_path / "ref", embedder=emb) as b:
        ids = [c.chunk_id for c in a.store.get_many(range(len(a)))]
        assert ids == [c.chunk_id for c in b.store.get_many(range(len(b)))]
        assert np.allclose(np.asarray(a.vectors[list(range(len(a)))]), np.asarray(b.vectors[list(range(len(b)))]), atol=1e-6)
