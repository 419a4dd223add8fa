"""A served index's documents are files of its vector store: a search hit's `file_id` is URL-safe and the real
`openai` client follows it (`files.retrieve`, `vector_stores.files.list/retrieve/content`); a caller reading as
principals neither lists nor retrieves a document it may not read."""

from __future__ import annotations

import re

import openai
import pytest

from ragsieve.service.auth.identity import KeyIdentity
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.documents.indexed import indexed_id
from tests.support.access_corpus import QUESTION, leaks
from tests.support.access_service_setup import NEEDLE, needle_index
from tests.support.service_fakes import served


def test_search_hits_of_a_served_index_lead_to_their_files(examples_index, tmp_path):
    with served({"lumen": examples_index}, data_dir=str(tmp_path / "data")) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="none", max_retries=0)
        hits = client.vector_stores.search(vector_store_id="lumen", query="How do I rotate an API key?").data
        assert hits
        listed = {f.id for f in client.vector_stores.files.list(vector_store_id="lumen", limit=100).data}
        for hit in hits:
            assert re.fullmatch(r"[A-Za-z0-9_-]+", hit.file_id), hit.file_id
            assert hit.file_id in listed
            assert client.files.retrieve(hit.file_id).filename == hit.filename
            entry = client.vector_stores.files.retrieve(file_id=hit.file_id, vector_store_id="lumen")
            assert entry.status == "completed"
            texts = [c.text for c in client.vector_stores.files.content(file_id=hit.file_id, vector_store_id="lumen")]
            assert hit.content[0].text in texts
        assert client.vector_stores.retrieve("lumen").file_counts.total == len(listed)


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    return needle_index(tmp_path_factory, embedder)


def test_a_restricted_caller_does_not_follow_an_unreadable_document(needle, tmp_path):
    bob, fin = "sk-bob-writer-1", "sk-fin-writer-1"
    keys = KeyRing(
        {bob: {"needle:write"}, fin: {"needle:write"}},
        {bob: KeyIdentity(("user:bob@example.com",)), fin: KeyIdentity(("group:finance",))},
    )
    secret = indexed_id("needle", NEEDLE)
    with served({"needle": needle[0]}, keys=keys, data_dir=str(tmp_path / "data")) as svc:

        def client(key):
            return openai.OpenAI(base_url=svc.base_url + "/v1", api_key=key, max_retries=0)

        assert secret in {f.id for f in client(fin).vector_stores.files.list(vector_store_id="needle")}
        assert client(fin).files.retrieve(secret).filename == NEEDLE
        listed = client(bob).vector_stores.files.list(vector_store_id="needle")
        assert secret not in {f.id for f in listed} and listed.data
        for call in (
            lambda: client(bob).files.retrieve(secret),
            lambda: client(bob).vector_stores.files.retrieve(file_id=secret, vector_store_id="needle"),
            lambda: list(client(bob).vector_stores.files.content(file_id=secret, vector_store_id="needle")),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        found = client(bob).vector_stores.search(vector_store_id="needle", query=QUESTION)
        assert leaks(found.model_dump_json()) == [] and secret not in found.model_dump_json()


def test_a_read_only_key_follows_hits_and_is_told_why_it_cannot_list_uploads(examples_index, tmp_path):
    keys = KeyRing({"sk-reader-0001": {"lumen"}})
    with served({"lumen": examples_index}, keys=keys, data_dir=str(tmp_path / "data")) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="sk-reader-0001", max_retries=0)
        hit = client.vector_stores.search(vector_store_id="lumen", query="How do I rotate an API key?").data[0]
        assert client.files.retrieve(hit.file_id).filename == hit.filename
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client.files.list()
        message = refused.value.body["message"]
        assert "read-only: listing" in message and "uploading" not in message, message
