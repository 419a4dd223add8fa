"""Every citation carries its deepest location (`#anchor`, `#page=N`, `#L10-L24`) on every surface, through
real clients on loopback: the `openai` SDK (annotations), LangChain's `ChatOpenAI` (the content's sources),
`/v1/ask`, the `mcp` client, the documents API's search."""

from __future__ import annotations

import json

import anyio
import httpx
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from ragsieve.agent.core.locations import deepest_location
from ragsieve.testing import FakeChat
from tests.core.test_formats import make_pdf
from tests.support.anchor_fixtures import QUESTION, build_site_index, citing_twice, every_chunk_config, write_site
from tests.support.service_fakes import served
from tests.support.web_fixtures import static_site


@pytest.fixture(scope="module")
def site_index(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("anchor-site")
    with static_site(write_site(root / "site")) as port:
        yield build_site_index(root / "index", port, embedder), port


def test_deepest_location_of_each_kind():
    assert deepest_location("http://h/p.html#top", "#lru") == "http://h/p.html#lru"
    assert deepest_location("manual.pdf", "pp. 2-3") == "manual.pdf#page=2"
    assert deepest_location("src/a.py", "Client.rotate", 10, 24) == "src/a.py#L10-L24"
    assert deepest_location("notes.md", "", 4, 4) == "notes.md#L4"
    assert deepest_location("plain.txt") == "plain.txt"


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
def test_the_anchor_reaches_every_surface(site_index):
    index, port = site_index
    lru = f"http://127.0.0.1:{port}/functools.html#lru"
    with served({"py": index}, FakeChat(default=citing_twice), config=every_chunk_config()) as svc:
        c = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
        reply = c.chat.completions.create(model="py", messages=[{"role": "user", "content": QUESTION}])
        message = reply.choices[0].message
        assert [a.url_citation.url for a in message.annotations or []] == [lru]
        assert message.annotations[0].url_citation.title.startswith("[1] ")
        ext = reply.model_extra["ragsieve"]
        assert [(x["location"], len(x["merged"])) for x in ext["citations"]] == [(lru, 1)]  # two chunks, one source
        asked = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION, "index": "py"}, timeout=60).json()
        assert [x["location"] for x in asked["citations"]] == [lru]

        async def mcp_ask() -> dict:
            async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    found = json.loads((await session.call_tool("search", {"query": "lru cache evicts"})).content[0].text)
                    assert any(h["location"] == lru for h in found["hits"])
                    return json.loads((await session.call_tool("ask", {"question": QUESTION})).content[0].text)

        assert [x["location"] for x in anyio.run(mcp_ask)["citations"]] == [lru]
        langchain = pytest.importorskip("langchain_openai")
        chain = langchain.ChatOpenAI(base_url=svc.base_url + "/v1", api_key="x", model="py", max_retries=0)
        content = chain.invoke(QUESTION).content
        # LangChain keeps no annotations from chat completions: the citations reach it in the content's sources
        assert f"[1] {lru}" in content and content.startswith("The decorator keeps")


def test_documents_api_search_results_carry_lines_and_pages(tmp_path):
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "widgets.py").write_text("def frobnicate_quux(widgets):\n    return sorted(widgets)\n", encoding="utf-8")
    make_pdf(folder / "policy.pdf", ["Plumbus Corp staff accrue 27 vacation days per year."])
    with served({}, FakeChat(default="x"), data_dir=str(tmp_path / "data"), request_timeout_s=120) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0)
        store = client.vector_stores.create(name="handbook")
        for name in ("widgets.py", "policy.pdf"):
            with open(folder / name, "rb") as fh:
                client.vector_stores.files.upload_and_poll(
                    vector_store_id=store.id, file=fh, poll_interval_ms=100, max_wait_seconds=120
                )
        code = client.vector_stores.search(store.id, query="frobnicate quux widgets").data[0]
        pdf = client.vector_stores.search(store.id, query="vacation days Plumbus").data[0]
    assert code.filename == "widgets.py" and code.model_extra["ragsieve"]["location"] == "widgets.py#L1-L2"
    assert pdf.filename == "policy.pdf" and pdf.model_extra["ragsieve"]["location"] == "policy.pdf#page=1"
