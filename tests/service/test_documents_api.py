"""The documents API through the official `openai` SDK: files, vector stores, polling, search, deletion, chat."""

from __future__ import annotations

import httpx
import openai
import pytest

from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.core.test_formats import make_pdf
from tests.support.service_fakes import served

MD = "# Deploying Zorblax\n\nThe zorblax gateway listens on port 7412 and reloads its routes every 90 seconds.\n"
PY = (
    'def frobnicate_quux(widgets):\n    """Sort the widgets by their quux weight, heaviest first."""\n'
    "    return sorted(widgets, key=lambda w: w.quux, reverse=True)\n"
)
PDF_PAGES = [
    "Vacation policy. Employees of Plumbus Corp accrue 27 vacation days per year, carried over up to a maximum of 10 days."
]
ANSWER = "The gateway listens on port 7412 [1]."


@pytest.fixture()
def corpus(tmp_path):
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "deploy-notes.md").write_text(MD, encoding="utf-8")
    (folder / "widgets.py").write_text(PY, encoding="utf-8")
    make_pdf(folder / "policy.pdf", PDF_PAGES)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj <</Type /Catalog>> garbage \x00\xff trailer")
    return folder


def test_vector_stores_with_the_openai_sdk(examples_index, corpus, tmp_path):
    keys = KeyRing({"sk-writer-0001": {"*:write"}, "sk-reader-0001": {"*"}})
    with served(
        {"lumen": examples_index}, FakeChat(default=ANSWER), keys=keys, data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="sk-writer-0001", max_retries=0)
        store = client.vector_stores.create(name="handbook", metadata={"team": "platform"})
        assert store.object == "vector_store" and store.name == "handbook" and store.file_counts.total == 0
        landed = {}
        for name, attributes in [
            ("deploy-notes.md", {"team": "infra", "year": 2024}),
            ("policy.pdf", {"team": "hr", "year": 2023}),
            ("widgets.py", {"team": "infra", "year": 2022}),
            ("broken.pdf", {}),
        ]:
            with open(corpus / name, "rb") as fh:
                landed[name] = client.vector_stores.files.upload_and_poll(
                    vector_store_id=store.id, file=fh, attributes=attributes, poll_interval_ms=100, max_wait_seconds=120
                )
        assert {n: f.status for n, f in landed.items()} == {
            "deploy-notes.md": "completed",
            "policy.pdf": "completed",
            "widgets.py": "completed",
            "broken.pdf": "failed",
        }
        broken = landed["broken.pdf"]
        assert broken.last_error is not None and broken.last_error.message and "broken.pdf" not in store.id
        counts = client.vector_stores.retrieve(store.id).file_counts
        assert (counts.completed, counts.failed, counts.total) == (3, 1, 4)

        def top(query, **kwargs):
            return list(client.vector_stores.search(store.id, query=query, **kwargs))

        hits = top("which port does the zorblax gateway listen on")
        assert hits[0].filename == "deploy-notes.md" and hits[0].file_id == landed["deploy-notes.md"].id
        assert 0 < hits[0].score <= 1 and "7412" in hits[0].content[0].text
        assert hits[0].attributes == {"team": "infra", "year": 2024}
        assert top("vacation days per year")[0].filename == "policy.pdf"  # the PDF's text was extracted
        assert top("sort widgets by quux weight")[0].filename == "widgets.py"
        infra = top("vacation days", filters={"type": "eq", "key": "team", "value": "infra"})
        assert infra and {h.filename for h in infra} <= {"deploy-notes.md", "widgets.py"}
        recent = top(
            "anything",
            filters={
                "type": "and",
                "filters": [{"type": "gte", "key": "year", "value": 2023}, {"type": "ne", "key": "team", "value": "hr"}],
            },
        )
        assert {h.filename for h in recent} == {"deploy-notes.md"}
        assert len(top("zorblax", max_num_results=1)) == 1
        high = top("zorblax", ranking_options={"score_threshold": 0.99})  # the hybrid score: the best is near 1
        assert high and all(h.score >= 0.99 for h in high) and len(high) < len(top("zorblax"))

        reply = client.chat.completions.create(
            model=store.id, messages=[{"role": "user", "content": "Which port does the zorblax gateway listen on?"}]
        )
        cited = [c["label"] for c in reply.model_extra["ragsieve"]["citations"]]
        assert cited and cited[0].startswith(landed["deploy-notes.md"].id + "/deploy-notes.md")
        assert "7412" in reply.choices[0].message.content

        hr_only = client.chat.completions.create(
            model=store.id,
            extra_body={"where": {"attributes": {"team": "hr"}}},
            messages=[{"role": "user", "content": "Which port is it?"}],
        )
        hr_cited = [c["chunk_id"] for c in hr_only.model_extra["ragsieve"]["citations"]]
        assert hr_cited and all(c.startswith(landed["policy.pdf"].id + "/") for c in hr_cited)  # attributes in `where`

        reader = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="sk-reader-0001", max_retries=0)
        assert reader.vector_stores.search(store.id, query="zorblax").data  # a read-only key reads
        with pytest.raises(openai.PermissionDeniedError, match="read"):
            reader.vector_stores.create(name="nope")
        with pytest.raises(openai.PermissionDeniedError):
            reader.vector_stores.files.delete(landed["widgets.py"].id, vector_store_id=store.id)

        deleted = client.vector_stores.files.delete(landed["deploy-notes.md"].id, vector_store_id=store.id)
        assert deleted.deleted
        assert all(h.filename != "deploy-notes.md" for h in top("zorblax gateway port 7412"))
        client.files.delete(landed["widgets.py"].id)  # deleting the file takes it out of every store
        assert all(h.filename != "widgets.py" for h in top("sort widgets by quux weight"))
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(landed["widgets.py"].id)
        assert client.vector_stores.delete(store.id).deleted
        with pytest.raises(openai.NotFoundError):
            client.vector_stores.retrieve(store.id)


def test_upload_limits_and_bad_requests(examples_index, tmp_path):
    with served({"lumen": examples_index}, data_dir=str(tmp_path / "data"), max_file_bytes=2048) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.APIStatusError) as big:
            client.files.create(file=("big.md", b"x" * 5000), purpose="assistants")
        assert big.value.status_code == 413
        with pytest.raises(openai.BadRequestError, match="empty"):
            client.files.create(file=("empty.md", b""), purpose="assistants")
        with pytest.raises(openai.BadRequestError, match="chunking_strategy"):
            client.vector_stores.create(
                name="x",
                chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 10}},
            )
        with pytest.raises(openai.NotFoundError):
            client.vector_stores.files.create(vector_store_id="vs_nope", file_id="file-nope")
        store = client.vector_stores.create(name="x")
        with pytest.raises(openai.NotFoundError):
            client.vector_stores.files.create(vector_store_id=store.id, file_id="file-nope")
        with pytest.raises(openai.BadRequestError, match="filter"):
            client.vector_stores.search(store.id, query="x", filters={"type": "near", "key": "a", "value": 1})
        assert client.vector_stores.search(store.id, query="x").data == []  # an empty store: no hits, no error
        served_store = client.vector_stores.retrieve("lumen")  # an index served with --index is a vector store
        assert served_store.id == "lumen"
        r = httpx.post(svc.base_url + "/v1/indexes/lumen/crawl", json={"url": "ftp://example.com/"})
        assert r.status_code == 400


def test_a_file_a_restart_interrupted_is_ingested_again(examples_index, tmp_path):
    from ragsieve.service.documents.catalog import Catalog
    from ragsieve.service.documents.views import new_entry

    data = tmp_path / "data"
    with served({"lumen": examples_index}, data_dir=str(data)) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="none", max_retries=0)
        store = client.vector_stores.create(name="kept")
    catalog = Catalog(data, {"lumen": examples_index})  # as a server that died mid-ingestion left it
    meta = catalog.add_file("late.md", MD.encode(), "assistants")
    catalog.stage(store.id, meta)
    catalog.put_entry(store.id, new_entry(store.id, meta, {}))
    with served({"lumen": examples_index}, data_dir=str(data)) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="none", max_retries=0)
        entry = client.vector_stores.files.poll(meta["id"], vector_store_id=store.id, poll_interval_ms=100, max_wait_seconds=120)
        assert entry.status == "completed"
        assert client.vector_stores.search(store.id, query="zorblax port").data[0].file_id == meta["id"]
