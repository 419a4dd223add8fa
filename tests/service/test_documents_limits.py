"""The documents API as strict clients see it, through the official `openai` SDK: a file batch larger than the
ingestion queue goes in whole (a full queue is a 429 with Retry-After), file names are kept as uploaded, `score`
orders the results so `score_threshold` keeps a top of the list, and response fields have OpenAI's types."""

from __future__ import annotations

import threading

import openai
import pytest

from ragsieve.service.documents.catalog import safe_filename
from ragsieve.testing import FakeChat
from tests.support.service_fakes import served

NAMES = ["__init__.py", "_wrap.py", "données.md", "notes-0.md", "notes-1.md"]


def test_safe_filename_keeps_the_name_and_drops_only_what_is_unsafe():
    assert [safe_filename(n) for n in NAMES] == NAMES
    assert safe_filename("a/b/../c.py") == safe_filename("..\\c.py") == "c.py"
    assert safe_filename("..") == "file" and safe_filename(".env") == "env"
    assert safe_filename("a\x00b\x1b[1m.py") == "a_b_[1m.py" and safe_filename("\u202eevil.py") == "_evil.py"
    long = safe_filename("é" * 150 + ".md")
    assert long.endswith(".md") and len(long.encode()) <= 200


def test_a_batch_larger_than_the_queue_names_and_scores(examples_index, tmp_path):
    with served(
        {"lumen": examples_index}, FakeChat(default="x"), data_dir=str(tmp_path / "data"), request_timeout_s=120, ingest_queue=2
    ) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        docs = svc.app.state.documents
        gate, entered = threading.Event(), threading.Event()
        build = docs.ingestor._do_add

        def held(batch):
            entered.set()
            gate.wait(120)
            return build(batch)

        docs.ingestor._do_add = held
        try:
            store = client.vector_stores.create(name="limits")
            first = client.files.create(file=("hold.md", b"# Hold\n\nHeld build.\n"), purpose="assistants")
            client.vector_stores.file_batches.create(store.id, file_ids=[first.id])
            assert entered.wait(60)  # the worker holds the first build: nothing else leaves the queue
            ids = [
                client.files.create(
                    file=(n, f"# {n}\n\nThe quokka token {i} rotates nightly.\n".encode()), purpose="assistants"
                ).id
                for i, n in enumerate(NAMES)
            ]
            big = client.vector_stores.file_batches.create(store.id, file_ids=ids)  # 5 files > a queue of 2
            assert big.file_counts.total == 5
            extra = client.files.create(file=("late.md", b"# Late\n\nLate file.\n"), purpose="assistants")
            with pytest.raises(openai.RateLimitError) as full:
                client.vector_stores.file_batches.create(store.id, file_ids=[extra.id])
            assert int(full.value.response.headers["retry-after"]) >= 1
        finally:
            gate.set()
        done = client.vector_stores.file_batches.poll(big.id, vector_store_id=store.id, poll_interval_ms=100)
        assert done.status == "completed" and done.file_counts.completed == 5
        files = list(client.vector_stores.files.list(store.id))
        assert all(isinstance(f.created_at, int) for f in files) and {f.chunking_strategy.type for f in files} == {"other"}
        assert not any(k.startswith("_") for f in files for k in (f.model_extra or {}))  # private fields stay in
        assert sorted(client.files.retrieve(i).filename for i in ids) == sorted(NAMES)
        results = client.vector_stores.search(store.id, query="quokka token rotates nightly", max_num_results=6).data
        assert {r.filename for r in results} >= set(NAMES)  # citations name the files uploaded
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
        cut = (scores[0] + scores[-1]) / 2
        kept = client.vector_stores.search(
            store.id,
            query="quokka token rotates nightly",
            max_num_results=6,
            ranking_options={"ranker": "none", "score_threshold": cut},
        ).data
        assert [r.score for r in kept] == [s for s in scores if s >= cut] and kept
