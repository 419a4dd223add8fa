"""The MCP server through the official `mcp` client: Streamable HTTP at /mcp of `ragsieve serve`, and stdio."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from ragsieve.service.auth.keys import KeyRing
from tests.support.service_fakes import served
from tests.support.stub_openai import StubOpenAI, StubReply, error_body

TOOLS = {"search", "ask", "read", "indexes"}
ADMIN, NOTES_ONLY = "sk-admin-0001", "sk-notes-0001"


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def error_text(result) -> str:
    assert result.isError, result.content
    return result.content[0].text


async def exercise(session: ClientSession, index: str, *, with_ask: bool) -> dict:
    """List tools, call each, a bad argument and a missing index; returns what the calls gave."""
    await session.initialize()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    search_schema = tools["search"].inputSchema
    assert {"query", "index", "top_k", "where"} <= set(search_schema["properties"])
    assert search_schema["required"] == ["query"]
    assert "citation label" in tools["search"].description
    listed = payload(await session.call_tool("indexes", {}))["indexes"]
    assert index in [i["name"] for i in listed] and all(i["chunks"] > 0 for i in listed)
    hits = payload(await session.call_tool("search", {"query": "rotate the API key", "index": index, "top_k": 3}))["hits"]
    assert 1 <= len(hits) <= 3 and all({"label", "chunk_id", "score", "snippet"} <= set(h) for h in hits)
    read = payload(await session.call_tool("read", {"ref": hits[0]["label"], "index": index, "neighbours": 1}))
    assert any(c["asked"] and c["chunk_id"] == hits[0]["chunk_id"] for c in read["chunks"])
    by_id = payload(await session.call_tool("read", {"ref": hits[0]["chunk_id"], "index": index}))["chunks"]
    assert [c["chunk_id"] for c in by_id] == [hits[0]["chunk_id"]]
    filtered = payload(await session.call_tool("search", {"query": "key", "index": index, "where": {"kind": "code"}}))["hits"]
    assert all(not h["source"].endswith(".md") for h in filtered)
    bad = error_text(await session.call_tool("search", {"query": "x", "index": index, "top_k": 0}))
    assert "top_k" in bad
    missing = error_text(await session.call_tool("search", {"query": "x", "index": "nope"}))
    assert "no index named 'nope'" in missing and index in missing
    unknown_ref = error_text(await session.call_tool("read", {"ref": "no/such/file.py:1-2", "index": index}))
    assert "nothing in index" in unknown_ref
    out = {"hits": hits}
    if with_ask:
        out["answer"] = payload(await session.call_tool("ask", {"question": "How do I rotate a key?", "index": index}))
    return out


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
def test_mcp_over_streamable_http_with_keys(examples_index, second_index):
    keys = KeyRing({ADMIN: {"*"}, NOTES_ONLY: {"notes"}})
    with served({"lumen": examples_index, "notes": second_index}, keys=keys) as svc:
        url = f"{svc.base_url}/mcp"

        async def main():
            async with streamablehttp_client(url, headers={"Authorization": f"Bearer {ADMIN}"}) as (r, w, _):
                async with ClientSession(r, w) as session:
                    got = await exercise(session, "lumen", with_ask=True)
            answer = got["answer"]
            assert "lumen keys rotate" in answer["answer"] and answer["citations"]
            assert all(c["label"] for c in answer["citations"])
            async with streamablehttp_client(url, headers={"Authorization": f"Bearer {NOTES_ONLY}"}) as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    names = [i["name"] for i in payload(await session.call_tool("indexes", {}))["indexes"]]
                    assert names == ["notes"]  # the other tenant's index is not even listed
                    hidden = error_text(await session.call_tool("search", {"query": "key", "index": "lumen"}))
                    assert "no index named 'lumen'" in hidden and "notes" in hidden
                    assert payload(await session.call_tool("search", {"query": "notes"}))["index"] == "notes"

        anyio.run(main)
        no_key = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert no_key.status_code == 401 and no_key.json()["error"]["code"] == "invalid_api_key"
        assert len(svc.chat.history) >= 1  # `ask` reached the (scripted) model


def test_mcp_over_stdio(examples_index):
    """`ragsieve mcp` as an agent starts it; the model endpoint fails, so `ask` is a tool error, not a crash."""
    with StubOpenAI([StubReply(status=400, body=error_body("no such model"))] * 8, max_requests=40) as stub:
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "ragsieve",
                "mcp",
                "--index",
                f"lumen={examples_index}",
                "--base-url",
                stub.base_url,
                "--model",
                "stub-model",
                "--request-timeout",
                "20",
            ],
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )

        async def main():
            with anyio.fail_after(240):
                async with stdio_client(params) as (r, w):
                    async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=120)) as session:
                        await exercise(session, "lumen", with_ask=False)
                        failed = error_text(await session.call_tool("ask", {"question": "How do I rotate a key?"}))
                        assert "no such model" in failed or "LLM" in failed or "model" in failed
                        assert payload(await session.call_tool("indexes", {}))["indexes"][0]["name"] == "lumen"

        anyio.run(main)


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
@pytest.mark.parametrize("plan", ["no-such-plan"])
def test_mcp_ask_refuses_unknown_plan(examples_index, plan):
    with served({"lumen": examples_index}) as svc:

        async def main():
            async with streamablehttp_client(f"{svc.base_url}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    text = error_text(await session.call_tool("ask", {"question": "q?", "plan": plan}))
                    assert "unknown plan" in text and "fast" in text

        anyio.run(main)
