"""The documents API's write routes read as the caller too: a writing key that may not read a file gets, on
every route that changes or removes it (relabel, delete from the store, delete the file, attach it elsewhere,
batch it), exactly the answer a missing file gets, and nothing changes. Through the real `openai` client."""

from __future__ import annotations

from functools import partial

import httpx
import openai
import pytest

from ragsieve.service.auth.identity import KeyIdentity
from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.core.test_full_plan import fake_model
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, leaks
from tests.support.access_service_setup import needle_index
from tests.support.service_fakes import served

WRITER, PUBLIC_WRITER, FIN = "sk-writer-0001", "sk-pub-writer-1", "sk-fin-all-001"
MISSING = "file-000000000000000000000000"


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    return needle_index(tmp_path_factory, embedder)


def _error(call) -> tuple[int, dict]:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    return caught.value.status_code, caught.value.body


def test_a_hidden_file_reads_as_missing_on_every_write_route(needle, tmp_path):
    keys = KeyRing(
        {WRITER: {"*:write"}, PUBLIC_WRITER: {"*:write"}, FIN: {"*"}},
        {PUBLIC_WRITER: KeyIdentity(()), FIN: KeyIdentity(("group:finance",))},
    )
    plan = tmp_path / "plan.md"
    plan.write_text(f"# Acquisition plan\n\n{NEEDLE_TEXT}\n")
    with served(
        {"needle": needle[0]}, FakeChat(default=fake_model), keys=keys, data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        owner = openai.OpenAI(base_url=svc.base_url + "/v1", api_key=WRITER, max_retries=0)
        store = owner.vector_stores.create(name="finance")
        with open(plan, "rb") as fh:
            secret = owner.vector_stores.files.upload_and_poll(
                vector_store_id=store.id,
                file=fh,
                attributes={"access": "group:finance"},
                poll_interval_ms=100,
                max_wait_seconds=120,
            ).id
        mallory = openai.OpenAI(base_url=svc.base_url + "/v1", api_key=PUBLIC_WRITER, max_retries=0)
        elsewhere = mallory.vector_stores.create(name="public")
        routes = {
            "relabel": lambda f: mallory.vector_stores.files.update(
                file_id=f, vector_store_id=store.id, attributes={"access": "public"}
            ),
            "delete from store": lambda f: mallory.vector_stores.files.delete(file_id=f, vector_store_id=store.id),
            "delete file": lambda f: mallory.files.delete(f),
            "attach elsewhere": lambda f: mallory.vector_stores.files.create(vector_store_id=elsewhere.id, file_id=f),
            "batch elsewhere": lambda f: mallory.vector_stores.file_batches.create(vector_store_id=elsewhere.id, file_ids=[f]),
            "store file": lambda f: mallory.vector_stores.files.retrieve(file_id=f, vector_store_id=store.id),
        }
        for name, route in routes.items():
            hidden, gone = _error(partial(route, secret)), _error(partial(route, MISSING))
            assert hidden[0] == gone[0] == 404, (name, hidden, gone)
            assert str(hidden[1]).replace(secret, "X") == str(gone[1]).replace(MISSING, "X"), (name, hidden, gone)
        # nothing changed: the file is still there, still labelled finance, and only finance reads it
        kept = owner.vector_stores.files.retrieve(file_id=secret, vector_store_id=store.id)
        assert kept.status == "completed" and kept.attributes == {"access": "group:finance"}
        assert owner.files.retrieve(secret).id == secret
        assert [f.id for f in owner.vector_stores.files.list(vector_store_id=elsewhere.id)] == []
        found = httpx.post(
            f"{svc.base_url}/v1/vector_stores/{store.id}/search",
            json={"query": QUESTION},
            headers={"Authorization": f"Bearer {PUBLIC_WRITER}"},
        )
        assert found.status_code == 200 and leaks(found.text) == []
        fin = httpx.post(
            f"{svc.base_url}/v1/vector_stores/{store.id}/search",
            json={"query": QUESTION},
            headers={"Authorization": f"Bearer {FIN}"},
        )
        assert NEEDLE_TEXT[:30] in fin.text
        # the restricted writer still attaches and deletes what it uploads itself (a file in no store yet)
        own = tmp_path / "holidays.md"
        own.write_text("# Holidays\n\nStaff take 25 days of paid holiday a year.\n")
        with open(own, "rb") as fh:
            mine = mallory.vector_stores.files.upload_and_poll(
                vector_store_id=elsewhere.id, file=fh, poll_interval_ms=100, max_wait_seconds=120
            )
        assert mine.status == "completed"
        assert mallory.vector_stores.files.delete(file_id=mine.id, vector_store_id=elsewhere.id).deleted
