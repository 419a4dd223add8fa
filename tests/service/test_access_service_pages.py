"""Who sees what through `ragsieve serve`'s other surfaces: MCP (search, ask, read as the caller), the chat page's
source view (as the link's owner), the widget (as the host page's signed user) and the documents API's `access`
attribute (a file hidden from everyone else). The HTTP answer surfaces and identity: test_access_service.py."""

from __future__ import annotations

import json

import anyio
import httpx
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from ragsieve.service.auth.identity import (
    KeyIdentity,
)
from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.core.test_full_plan import fake_model
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, leaks, token
from tests.support.access_service_setup import BOB, FIN, NEEDLE, needle_index, ring
from tests.support.service_fakes import served

pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    return needle_index(tmp_path_factory, embedder)


def test_mcp_search_ask_read_as_the_caller(needle):
    index, _, jwks = needle
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks)) as svc:
        url = f"{svc.base_url}/mcp"

        async def session_as(key: str) -> dict:
            out = {}
            async with streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"}) as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    out["indexes"] = (await session.call_tool("indexes", {})).content[0].text
                    out["search"] = (await session.call_tool("search", {"query": QUESTION, "top_k": 5})).content[0].text
                    out["ask"] = (await session.call_tool("ask", {"question": QUESTION})).content[0].text
                    read = await session.call_tool("read", {"ref": NEEDLE + "#0", "neighbours": 2})
                    missing = await session.call_tool("read", {"ref": "corpus/finance/nothing.md#0"})
                    out["read"], out["read_error"] = read.content[0].text, read.isError
                    out["missing"] = missing.content[0].text
            return out

        fin = anyio.run(session_as, FIN)
        assert NEEDLE_TEXT[:40] in fin["read"] and not fin["read_error"] and NEEDLE in fin["search"]
        assert NEEDLE in fin["ask"]
        bob = anyio.run(session_as, BOB)
        assert bob["read_error"] and bob["read"].replace(NEEDLE, "X") == bob["missing"].replace(
            "corpus/finance/nothing.md", "X"
        )  # a forbidden document reads exactly as a missing one
        assert leaks(bob["search"] + bob["ask"] + bob["indexes"]) == []
        assert json.loads(bob["indexes"])["indexes"][0]["documents"] == 3


def test_the_chat_page_source_view_reads_as_the_link_owner(needle, tmp_path):
    import shutil

    from ragsieve.tools.access.labels import set_rules
    from ragsieve.tools.access.rules import AccessRules
    from tests.support.service_fakes import sse_events

    index = tmp_path / "index"
    shutil.copytree(needle[0], index)
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(needle[2])) as svc:
        page = httpx.post(
            svc.base_url + "/ui/api/ask",
            json={"question": QUESTION, "index": "needle"},
            headers={"Authorization": f"Bearer {FIN}"},
            timeout=120,
        )
        done = [d for name, d in sse_events(page) if name == "done"][0]
        href = next(c["href"] for c in done["citations"] if c["source"] == NEEDLE)
        assert "as=group%3Afinance" in href
        opened = httpx.get(svc.base_url + href.split("#")[0])
        assert opened.status_code == 200 and "Heron acquisition" in opened.text
        widened = httpx.get(svc.base_url + href.split("#")[0].replace("as=group%3Afinance", "as=public"))
        assert widened.status_code == 404  # the principals are signed with the chunk
        set_rules(index, AccessRules.parse("finance/ group:board\n"))  # finance loses the document
        revoked = httpx.get(svc.base_url + href.split("#")[0])
        assert revoked.status_code == 404 and revoked.json()["error"]["message"] == widened.json()["error"]["message"]


def test_the_widget_reads_as_the_host_pages_signed_user(needle, tmp_path):
    from ragsieve import Config
    from ragsieve.agent.llm.client import LLM
    from ragsieve.service.app import create_app
    from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
    from ragsieve.service.indexes.registry import IndexRegistry
    from ragsieve.service.server import ServiceThread
    from ragsieve.service.settings import ServiceSettings
    from tests.support.service_fakes import sse_events

    index, key, jwks = needle
    site, widget_key = "https://docs.example.com", "pk-needle-site-01"
    widgets = WidgetKeys([WidgetKey(widget_key, frozenset({"needle"}), frozenset({site}), 60, visitor_requests_per_minute=60)])
    registry = IndexRegistry({"needle": index}, Config(), llm=LLM(FakeChat(default=fake_model)))
    settings = ServiceSettings(port=0)
    app = create_app(registry, settings, ring(jwks), preload_model=False, widget_keys=widgets)
    try:
        with ServiceThread(app, settings, lifetime_s=120) as svc:

            def ask(extra: dict) -> httpx.Response:
                return httpx.post(
                    svc.base_url + "/ui/api/ask",
                    json={"question": QUESTION},
                    timeout=120,
                    headers={"Authorization": f"Bearer {widget_key}", "Origin": site, **extra},
                )

            fin = ask({"X-Ragsieve-User-Token": token(key, user="fin@example.com", groups=["finance"])})
            done = [d for name, d in sse_events(fin) if name == "done"][0]
            assert NEEDLE in {c["source"] for c in done["citations"]}
            anonymous = ask({})
            assert anonymous.status_code == 200 and leaks(anonymous.text) == []
            expired = ask({"X-Ragsieve-User-Token": token(key, user="fin@example.com", groups=["finance"], exp_in_s=-120)})
            assert expired.status_code == 401 and leaks(expired.text) == []
    finally:
        registry.close()


def test_documents_api_access_attribute_hides_a_file_from_everyone_else(needle, tmp_path):
    writer, fin, bob = "sk-writer-0001", "sk-fin-all-001", "sk-bob-all-001"
    keys = KeyRing(
        {writer: {"*:write"}, fin: {"*"}, bob: {"*"}},
        {fin: KeyIdentity(("group:finance",)), bob: KeyIdentity(("user:bob@example.com",))},
    )
    files = tmp_path / "upload"
    files.mkdir()
    (files / "plan.md").write_text(f"# Acquisition plan\n\n{NEEDLE_TEXT}\n")
    (files / "holidays.md").write_text("# Holidays\n\nStaff take 25 days of paid holiday a year.\n")
    with served(
        {"needle": needle[0]}, FakeChat(default=fake_model), keys=keys, data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        w = openai.OpenAI(base_url=svc.base_url + "/v1", api_key=writer, max_retries=0)
        store = w.vector_stores.create(name="uploads")
        landed = {}
        for name, attributes in (("plan.md", {"access": "group:finance"}), ("holidays.md", {})):
            with open(files / name, "rb") as fh:
                landed[name] = w.vector_stores.files.upload_and_poll(
                    vector_store_id=store.id, file=fh, attributes=attributes, poll_interval_ms=100, max_wait_seconds=120
                )
        assert {f.status for f in landed.values()} == {"completed"}
        secret = landed["plan.md"].id
        bad = httpx.post(
            f"{svc.base_url}/v1/vector_stores/{store.id}/files/{secret}",
            json={"attributes": {"access": "group:"}},
            headers={"Authorization": f"Bearer {writer}"},
        )
        assert bad.status_code == 400 and "access" in bad.json()["error"]["message"]

        def seen_by(key: str) -> str:
            auth = {"Authorization": f"Bearer {key}"}
            base = f"{svc.base_url}/v1/vector_stores/{store.id}"
            parts = [
                httpx.post(base + "/search", json={"query": QUESTION}, headers=auth).text,
                httpx.get(base + "/files", headers=auth).text,
                httpx.get(base, headers=auth).text,
            ]
            for url in (f"{base}/files/{secret}", f"{base}/files/{secret}/content"):
                r = httpx.get(url, headers=auth)
                parts.append(f"{r.status_code} {r.text}")
            return "\n".join(parts)

        assert NEEDLE_TEXT[:40] in seen_by(fin) and secret in seen_by(fin)
        other = seen_by(bob)
        assert leaks(other) == [] and secret not in other.replace(f"no file {secret!r}", "")
        missing = httpx.get(
            f"{svc.base_url}/v1/vector_stores/{store.id}/files/file-000000000000000000000000",
            headers={"Authorization": f"Bearer {bob}"},
        )
        forbidden = httpx.get(
            f"{svc.base_url}/v1/vector_stores/{store.id}/files/{secret}", headers={"Authorization": f"Bearer {bob}"}
        )
        assert forbidden.status_code == missing.status_code == 404
        assert forbidden.json()["error"]["message"].replace(secret, "X") == missing.json()["error"]["message"].replace(
            "file-000000000000000000000000", "X"
        )
        assert '"total":1' in httpx.get(
            f"{svc.base_url}/v1/vector_stores/{store.id}", headers={"Authorization": f"Bearer {bob}"}
        ).text.replace(" ", "")
