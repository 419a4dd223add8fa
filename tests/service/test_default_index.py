"""Which index a call that names none uses: the only index served with --index that the caller may read; a
vector store someone creates over the documents API never changes it (issue 55, item 7). The rule is one
function, `IndexRegistry.default_index`, used by /v1/ask, the chat page's API and MCP."""

from __future__ import annotations

import httpx
import openai

from ragsieve.testing import FakeChat
from tests.support.service_fakes import served

ANSWER = "The gateway listens on port 7412 [1]."
QUESTION = "Which port does the zorblax gateway listen on?"


def test_an_uploaded_vector_store_does_not_break_unnamed_asks(examples_index, tmp_path):
    upload = tmp_path / "deploy-notes.md"
    upload.write_text("# Deploying Zorblax\n\nThe zorblax gateway listens on port 7412.\n", encoding="utf-8")
    with served(
        {"lumen": examples_index}, FakeChat(default=ANSWER), data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        assert httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60).status_code == 200
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="unused", max_retries=0)
        store = client.vector_stores.create(name="handbook")
        with open(upload, "rb") as fh:
            done = client.vector_stores.files.upload_and_poll(
                vector_store_id=store.id, file=fh, poll_interval_ms=100, max_wait_seconds=120
            )
        assert done.status == "completed" and store.id in svc.registry.orchestrators  # two indexes now
        after = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60)
        assert after.status_code == 200, after.text
        cited = [c["label"] for c in after.json()["citations"]]
        assert cited and all(c.startswith("examples/") for c in cited), cited  # the served index, not the store
        page = httpx.post(svc.base_url + "/ui/api/ask", json={"question": QUESTION}, timeout=60)
        assert page.status_code == 200, page.text  # the chat page's API follows the same rule
        named = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION, "index": store.id}, timeout=60)
        assert named.status_code == 200 and all(
            c["label"].startswith(done.id + "/deploy-notes.md") for c in named.json()["citations"]
        )
        assert svc.registry.default_index(sorted(svc.registry.orchestrators)) == "lumen"


def test_two_served_indexes_still_need_a_name(examples_index):
    with served({"a": examples_index, "b": examples_index}, FakeChat(default=ANSWER)) as svc:
        r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60)
        assert r.status_code == 400 and "name the index" in r.json()["error"]["message"]
        assert svc.registry.default_index(["a"]) == "a"  # a caller who may read only one gets that one
