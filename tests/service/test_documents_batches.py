"""The rest of OpenAI's documents API through the official `openai` SDK: file batches (upload_and_poll,
create_and_poll, cancel, list_files), file download and listing, vector store and file attribute updates,
a store file's parsed content — and malformed requests on each of those routes."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.service.test_documents_api import ANSWER, MD, PY
from tests.support.service_fakes import served

BROKEN_PDF = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> garbage \x00\xff trailer"
NOTE = "# Ferry notes\n\nThe Skellig ferry leaves pier nine at 07:45 every weekday.\n"
KEYS = KeyRing({"sk-writer-0001": {"*:write"}, "sk-reader-0001": {"*"}})


def _client(svc, key="sk-writer-0001"):
    return openai.OpenAI(base_url=svc.base_url + "/v1", api_key=key, max_retries=0, timeout=120)


def _keyed_service(examples_index, tmp_path):
    """The lumen index with the scripted model, the test keys and a data folder for the documents API."""
    return served(
        {"lumen": examples_index}, FakeChat(default=ANSWER), keys=KEYS, data_dir=str(tmp_path / "data"), request_timeout_s=120
    )


def _upload_batch(client, store_name: str, files: list):
    """A new vector store and a file batch of `files` uploaded into it, polled until done."""
    store = client.vector_stores.create(name=store_name)
    return store, client.vector_stores.file_batches.upload_and_poll(store.id, files=files, poll_interval_ms=100)


def _files_of(hits):
    return {h.filename for h in hits}


def test_batches_downloads_and_updates_with_the_openai_sdk(examples_index, tmp_path):
    with _keyed_service(examples_index, tmp_path) as svc:
        client = _client(svc)
        store, batch = _upload_batch(
            client,
            "handbook",
            [
                ("deploy-notes.md", MD.encode()),
                ("widgets.py", PY.encode()),
                ("broken.pdf", BROKEN_PDF),
                ("Brewfile", b"brew 'git'\n"),
            ],
        )
        assert batch.object == "vector_store.files_batch" and batch.status == "completed"
        assert (batch.file_counts.completed, batch.file_counts.failed, batch.file_counts.total) == (2, 2, 4)
        failed = list(client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, filter="failed"))
        assert [f.status for f in failed] == ["failed"] * 2 and all(f.last_error.message for f in failed)
        assert sorted(f.last_error.code for f in failed) == ["invalid_file", "unsupported_file"]
        listed = list(client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, limit=1))
        assert len(listed) == 4  # the SDK follows has_more/after across pages of one
        first = client.vector_stores.files.list(store.id, limit=2, order="asc")
        assert first.has_more and len(first.data) == 2
        back = client.vector_stores.files.list(store.id, limit=2, order="asc", before=first.data[1].id)
        assert [f.id for f in back.data] == [first.data[0].id]
        assert client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).status == "completed"

        by_name = {f.filename: f for f in client.files.list(limit=1)}  # paginated listing, newest first
        assert set(by_name) == {"deploy-notes.md", "widgets.py", "broken.pdf", "Brewfile"}
        assert client.files.content(by_name["widgets.py"].id).read() == PY.encode()  # bytes as uploaded
        assert client.files.content(by_name["broken.pdf"].id).read() == BROKEN_PDF
        assert [f.filename for f in client.files.list(purpose="batch")] == []

        parsed = client.vector_stores.files.content(by_name["deploy-notes.md"].id, vector_store_id=store.id)
        assert "7412" in " ".join(p.text for p in parsed) and all(p.type == "text" for p in parsed)

        # a second batch from ids already uploaded, with per-file attributes
        note = client.files.create(file=("ferry.md", NOTE.encode()), purpose="assistants")
        second = client.vector_stores.file_batches.create_and_poll(
            store.id, files=[{"file_id": note.id, "attributes": {"team": "ops"}}], poll_interval_ms=100
        )
        assert second.status == "completed" and second.file_counts.completed == 1
        assert client.vector_stores.files.retrieve(note.id, vector_store_id=store.id).attributes == {"team": "ops"}

        # attributes changed after ingestion are what filters and `where` see from then on
        notes_id = by_name["deploy-notes.md"].id
        updated = client.vector_stores.files.update(notes_id, vector_store_id=store.id, attributes={"team": "ops", "year": 2025})
        assert updated.attributes == {"team": "ops", "year": 2025} and updated.status == "completed"
        ops = client.vector_stores.search(
            store.id, query="port 7412 ferry", filters={"type": "eq", "key": "team", "value": "ops"}
        )
        assert _files_of(ops) == {"deploy-notes.md", "ferry.md"}
        recent = client.vector_stores.search(store.id, query="port", filters={"type": "gte", "key": "year", "value": 2025})
        assert _files_of(recent) == {"deploy-notes.md"}
        reply = client.chat.completions.create(
            model=store.id,
            extra_body={"where": {"attributes": {"year": 2025}}},
            messages=[{"role": "user", "content": "Which port?"}],
        )
        cited = [c["chunk_id"] for c in reply.model_extra["ragsieve"]["citations"]]
        assert cited and all(c.startswith(notes_id + "/") for c in cited)

        renamed = client.vector_stores.update(store.id, name="ops handbook", metadata={"owner": "ops"})
        assert (renamed.name, renamed.metadata) == ("ops handbook", {"owner": "ops"})
        again = client.vector_stores.retrieve(store.id)
        assert (again.name, again.metadata, again.file_counts.total) == ("ops handbook", {"owner": "ops"}, 5)

        dated = client.vector_stores.update(store.id, expires_after={"anchor": "last_active_at", "days": 7})
        assert dated.expires_after.days == 7 and dated.expires_at == dated.last_active_at + 7 * 86400
        assert client.vector_stores.update(store.id, expires_after=None).expires_at is None  # null: never again

        reader = _client(svc, "sk-reader-0001")
        with pytest.raises(openai.PermissionDeniedError):
            reader.vector_stores.update(store.id, name="mine")
        with pytest.raises(openai.PermissionDeniedError):
            reader.vector_stores.files.update(notes_id, vector_store_id=store.id, attributes={})
        with pytest.raises(openai.PermissionDeniedError):
            reader.vector_stores.file_batches.create(store.id, file_ids=[note.id])
        with pytest.raises(openai.PermissionDeniedError):
            reader.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
        assert reader.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).id == batch.id


def test_cancelling_a_batch_keeps_its_files_out_of_the_index(examples_index, tmp_path):
    with served(
        {"lumen": examples_index}, FakeChat(default=ANSWER), data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        client = _client(svc, "none")
        docs = svc.app.state.documents
        gate, entered = threading.Event(), threading.Event()
        build = docs.ingestor._do_add

        def held(batch):  # the first build waits until the test lets it go
            entered.set()
            gate.wait(60)
            return build(batch)

        docs.ingestor._do_add = held
        try:
            store = client.vector_stores.create(name="cancel")
            ids = [
                client.files.create(file=(f"{n}.md", text.encode()), purpose="assistants").id
                for n, text in [("running", NOTE), ("queued", MD)]
            ]
            running = client.vector_stores.file_batches.create(store.id, file_ids=[ids[0]])
            assert entered.wait(30)  # its build has started (held)
            queued = client.vector_stores.file_batches.create(store.id, file_ids=[ids[1]])
            assert queued.status == "in_progress" and queued.file_counts.in_progress == 1
            for b in (running, queued):
                out = client.vector_stores.file_batches.cancel(b.id, vector_store_id=store.id)
                assert out.status == "cancelled" and out.file_counts.cancelled == 1
        finally:
            gate.set()
            docs.ingestor._do_add = build
        ends = time.monotonic() + 60
        while docs.ingestor.pending() or any(j["status"] in ("queued", "running") for j in docs.ingestor.jobs.values()):
            assert time.monotonic() < ends, "the ingestion jobs did not end"
            time.sleep(0.1)
        for b in (running, queued):
            polled = client.vector_stores.file_batches.poll(b.id, vector_store_id=store.id, poll_interval_ms=50)
            assert polled.status == "cancelled"
            assert [f.status for f in client.vector_stores.file_batches.list_files(b.id, vector_store_id=store.id)] == [
                "cancelled"
            ]
        # the held build went through, then its cancelled file was taken out; the queued one was never built
        assert client.vector_stores.search(store.id, query="Skellig ferry pier nine").data == []
        assert client.vector_stores.search(store.id, query="zorblax gateway port").data == []
        assert client.vector_stores.retrieve(store.id).file_counts.cancelled == 2
        done = client.vector_stores.file_batches.cancel(running.id, vector_store_id=store.id)  # again: no change
        assert done.status == "cancelled"


MALFORMED = [
    ("post", "/v1/vector_stores/{vs}/file_batches", {}, 400),  # neither file_ids nor files
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["{f}"], "files": [{"file_id": "{f}"}]}, 400),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": []}, 400),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["{f}", "{f}"]}, 400),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["file-nope"]}, 404),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["x"] * 501}, 400),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["x" * 2_000_000]}, 413),  # over the body limit
    ("post", "/v1/vector_stores/{vs}/files/{f}", {"attributes": {"note": "y" * 2_000_000}}, 413),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["{f}"], "attributes": {"a": {"b": 1}}}, 400),
    ("post", "/v1/vector_stores/{vs}/file_batches", {"file_ids": ["{f}"], "chunking_strategy": {"type": "x"}}, 400),
    ("post", "/v1/vector_stores/vs_nope/file_batches", {"file_ids": ["{f}"]}, 404),
    ("get", "/v1/vector_stores/{vs}/file_batches/vsfb_nope", None, 404),
    ("get", "/v1/vector_stores/{vs}/file_batches/..%2F..%2Fmeta", None, 404),
    ("post", "/v1/vector_stores/{vs}/file_batches/vsfb_nope/cancel", None, 404),
    ("get", "/v1/vector_stores/{vs}/file_batches/vsfb_nope/files", None, 404),
    ("post", "/v1/vector_stores/{vs}", {"expires_after": {"anchor": "created_at", "days": 2}}, 400),
    ("post", "/v1/vector_stores/{vs}", {"expires_after": {"anchor": "last_active_at", "days": 0}}, 400),
    ("post", "/v1/vector_stores/{vs}", {"expires_after": {"anchor": "last_active_at", "days": "7"}}, 400),
    ("post", "/v1/vector_stores", {"expires_after": {"anchor": "last_active_at", "days": 366}}, 400),
    ("post", "/v1/vector_stores/lumen", {"expires_after": {"anchor": "last_active_at", "days": 1}}, 400),
    ("post", "/v1/vector_stores/{vs}", {"metadata": {f"k{i}": "v" for i in range(17)}}, 400),
    ("post", "/v1/vector_stores/{vs}", {"name": "x", "colour": "red"}, 400),
    ("post", "/v1/vector_stores/vs_nope", {"name": "x"}, 404),
    ("post", "/v1/vector_stores/{vs}/files/{f}", {}, 400),  # attributes is required (null clears them)
    ("post", "/v1/vector_stores/{vs}/files/{f}", {"attributes": {"k" * 65: 1}}, 400),
    ("post", "/v1/vector_stores/{vs}/files/file-nope", {"attributes": {}}, 404),
    ("get", "/v1/files/file-nope/content", None, 404),
    ("get", "/v1/files/..%2F..%2Fjobs.sqlite/content", None, 404),
    ("get", "/v1/vector_stores/{vs}/files/file-nope/content", None, 404),
    ("get", "/v1/files?limit=0", None, 400),
    ("get", "/v1/files?order=sideways", None, 400),
    ("get", "/v1/vector_stores/{vs}/files?filter=done", None, 400),
    ("get", "/v1/vector_stores/{vs}/file_batches/vsfb_nope/files?filter=done", None, 404),
    ("get", "/v1/jobs/job_nope", None, 404),
    ("get", "/v1/jobs/..%2Fjobs", None, 404),
]


def test_malformed_requests_get_a_clear_4xx_and_change_nothing(examples_index, tmp_path):
    with served({"lumen": examples_index}, data_dir=str(tmp_path / "data")) as svc:
        client = _client(svc, "none")
        store = client.vector_stores.create(name="hostile", metadata={"keep": "me"})
        f = client.files.create(file=("a.md", b"# A\n\nalpha\n"), purpose="assistants")
        for method, path, body, status in MALFORMED:
            url = svc.base_url + path.replace("{vs}", store.id).replace("{f}", f.id)
            if body is not None:
                body = json.loads(json.dumps(body).replace("{f}", f.id))
            r = httpx.request(method, url, json=body, timeout=30)
            assert r.status_code == status, (method, path, r.text)
            error = r.json()["error"]
            assert error["message"] and error["type"], (method, path)
        kept = client.vector_stores.retrieve(store.id)
        assert (kept.name, kept.metadata, kept.file_counts.total) == ("hostile", {"keep": "me"}, 0)
        assert client.files.content(f.id).read() == b"# A\n\nalpha\n"


def test_wrong_content_types_and_bodies_on_the_new_routes(examples_index, tmp_path):
    with served({"lumen": examples_index}, data_dir=str(tmp_path / "data"), max_files_per_store=2) as svc:
        client = _client(svc, "none")
        store = client.vector_stores.create(name="bodies")
        ids = [
            client.files.create(file=(f"n{i}.md", f"# N{i}\n\nnote {i}\n".encode()), purpose="assistants").id for i in range(3)
        ]
        with pytest.raises(openai.BadRequestError, match="at most 2 files"):
            client.vector_stores.file_batches.create(store.id, file_ids=ids)  # over the store's limit: refused whole
        assert list(client.vector_stores.files.list(store.id)) == []
        for f in ids:
            client.files.delete(f)
        base = f"{svc.base_url}/v1/vector_stores/{store.id}"
        for url in (base + "/file_batches", base, base + "/files/file-x"):
            garbage = httpx.post(url, content=b"\x00\xff{not json", headers={"content-type": "application/json"})
            assert garbage.status_code == 400, (url, garbage.text)
            text = httpx.post(url, content=b"file_ids=1", headers={"content-type": "text/plain"})
            assert 400 <= text.status_code < 500, (url, text.text)
            listy = httpx.post(url, json=["file_ids"])
            assert listy.status_code == 400, (url, listy.text)
        upload = svc.base_url + "/v1/files"
        assert httpx.post(upload, json={"file": "x"}).status_code == 400  # not multipart
        assert (
            httpx.post(upload, content=b"--x\r\n\r\n", headers={"content-type": "multipart/form-data; boundary=x"}).status_code
            == 400
        )  # a truncated form
        assert httpx.post(upload, files={"purpose": (None, "assistants")}).status_code == 400  # no file part
        assert client.vector_stores.retrieve(store.id).name == "bodies"  # nothing changed
        assert list(client.files.list()) == []


def test_an_expired_vector_store_is_deleted_and_its_files_kept(examples_index, tmp_path):
    from ragsieve.service.documents.catalog import write_json

    with served({"lumen": examples_index}, data_dir=str(tmp_path / "data")) as svc:
        client = _client(svc, "none")
        short = client.vector_stores.create(name="short", expires_after={"anchor": "last_active_at", "days": 1})
        kept = client.vector_stores.create(name="kept", expires_after={"anchor": "last_active_at", "days": 2})
        assert short.expires_at == short.created_at + 86400 and short.status == "completed"
        note = client.files.create(file=("ferry.md", NOTE.encode()), purpose="assistants")
        client.vector_stores.files.create_and_poll(note.id, vector_store_id=short.id, poll_interval_ms=100)
        docs = svc.app.state.documents
        assert docs.reap() == []  # nothing is due yet
        for store in (short, kept):  # as if last used 36 hours ago
            meta = docs.catalog.store(store.id)
            write_json(docs.catalog.store_dir(store.id) / "meta.json", meta | {"last_active_at": meta["created_at"] - 36 * 3600})
        assert docs.reap() == [short.id]
        with pytest.raises(openai.NotFoundError):
            client.vector_stores.retrieve(short.id)
        assert short.id not in svc.registry.orchestrators
        assert client.vector_stores.retrieve(kept.id).expires_at < time.time() + 86400
        assert client.files.retrieve(note.id).filename == "ferry.md"  # the upload itself stays
        client.vector_stores.search(kept.id, query="ferry")  # a search is activity: the clock starts again
        assert client.vector_stores.retrieve(kept.id).expires_at >= time.time() + 2 * 86400 - 60


def test_a_batch_where_nothing_can_be_read_gives_each_file_its_own_reason(examples_index, tmp_path):
    # the build reads nothing at all (UsageError): each file still says why, not the batch's one message
    with _keyed_service(examples_index, tmp_path) as svc:
        client = _client(svc)
        store, batch = _upload_batch(client, "unreadable", [("broken.pdf", BROKEN_PDF), ("Brewfile", b"brew 'git'\n")])
        assert (batch.file_counts.completed, batch.file_counts.failed) == (0, 2)
        failed = list(client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id))
        codes = {client.files.retrieve(f.id).filename: f.last_error.code for f in failed}
        assert codes == {"broken.pdf": "invalid_file", "Brewfile": "unsupported_file"}
