"""The MCP tools as a strict client sees them (the official `mcp` client over Streamable HTTP on loopback):
annotations, output schemas and structured results, arguments taken as sent (no coercion, no unknown ones,
one-line errors), `ask`'s progress notifications and accurate plan, `read` by a path's last parts, and vector
stores kept apart from the indexes unless asked for (their names resolve)."""

from __future__ import annotations

import json

import anyio
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from ragsieve.testing import FakeChat
from tests.support.service_fakes import ANSWER, served

pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")


def error_line(result) -> str:
    assert result.isError, result.content
    text = result.content[0].text
    assert "\n" not in text, text  # one line
    return text


def test_tools_are_annotated_typed_and_strict(examples_index):
    with served({"lumen": examples_index}, FakeChat(default=ANSWER, token_delay_s=0.01)) as svc:

        async def main():
            async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    for tool in tools.values():
                        assert tool.annotations is not None and tool.annotations.readOnlyHint is True
                        assert tool.outputSchema and tool.outputSchema["type"] == "object"
                        assert tool.inputSchema.get("additionalProperties") is False
                    assert (
                        "by default fast" in tools["ask"].description
                        and "agentic" not in tools["ask"].description.split("plans:")[0]
                    )
                    found = await session.call_tool("search", {"query": "rotate the API key", "top_k": 3})
                    assert not found.isError and found.structuredContent["hits"]
                    assert json.loads(found.content[0].text) == found.structuredContent
                    assert "top_k" in error_line(await session.call_tool("search", {"query": "key", "top_k": "3"}))
                    assert "colour: unknown argument" in error_line(
                        await session.call_tool("search", {"query": "key", "colour": "red"})
                    )
                    assert "question: required" in error_line(await session.call_tool("ask", {}))
                    progress: list[tuple[float, str | None]] = []

                    async def on_progress(done: float, total: float | None, message: str | None) -> None:
                        progress.append((done, message))

                    asked = await session.call_tool(
                        "ask", {"question": "How do I rotate the API key?"}, progress_callback=on_progress
                    )
                    assert not asked.isError and asked.structuredContent["plan"] == "fast"
                    assert asked.structuredContent["grounding"] == "cited"
                    assert progress and any("retrieve" in (m or "") for _, m in progress)
                    read = await session.call_tool("read", {"ref": "api-keys.md"})  # the path's last part
                    assert not read.isError
                    assert all(c["source"].endswith("/api-keys.md") for c in read.structuredContent["chunks"])

        anyio.run(main)


def test_vector_stores_stay_out_of_the_way_and_resolve_by_name(examples_index, tmp_path):
    with served(
        {"lumen": examples_index}, FakeChat(default=ANSWER), data_dir=str(tmp_path / "data"), request_timeout_s=120
    ) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        lumen = client.vector_stores.retrieve("lumen")  # the served index, as a store: not an empty one
        assert lumen.file_counts.completed == lumen.file_counts.total > 0 and lumen.usage_bytes > 0
        store = client.vector_stores.create(name="handbook")
        client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id,
            file=("ferry.md", b"# Ferry\n\nThe Skellig ferry leaves pier nine at 07:45.\n"),
            poll_interval_ms=100,
            max_wait_seconds=120,
        )

        async def main():
            async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    plain = (await session.call_tool("indexes", {})).structuredContent["indexes"]
                    assert [i["name"] for i in plain] == ["lumen"]  # the store is not an index
                    every = (await session.call_tool("indexes", {"include_stores": True})).structuredContent
                    assert {(i["name"], i["kind"], i["title"]) for i in every["indexes"]} == {
                        ("lumen", "index", "lumen"),
                        (store.id, "vector_store", "handbook"),
                    }
                    assert (await session.call_tool("search", {"query": "rotate"})).structuredContent["index"] == "lumen"
                    by_name = await session.call_tool("search", {"query": "ferry pier", "index": "handbook"})
                    assert by_name.structuredContent["index"] == store.id and by_name.structuredContent["hits"]

        anyio.run(main)
