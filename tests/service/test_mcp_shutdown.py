"""`ragsieve serve` exits within 10 s of SIGTERM while an MCP client (the official `mcp` client) still holds its
session and streams open."""

from __future__ import annotations

import os
import signal
import time

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from tests.support.serve_process import serve_process
from tests.support.stub_openai import StubOpenAI, ok


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
def test_serve_exits_promptly_after_mcp_streams(examples_index, tmp_path):
    with StubOpenAI([ok("Rotate it [1].")] * 4) as upstream:
        env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "up"}
        took: dict[str, float] = {}
        with serve_process(examples_index, "--data-dir", str(tmp_path / "data"), env=env) as (proc, base):

            async def main() -> None:
                try:
                    async with streamablehttp_client(f"{base}/mcp") as (r, w, _), httpx.AsyncClient(timeout=60) as raw:
                        async with ClientSession(r, w) as session:
                            await session.initialize()
                            assert not (await session.call_tool("search", {"query": "rotate"})).isError
                            held = await raw.send(
                                raw.build_request(  # a standalone stream, as the Inspector opens
                                    "GET", f"{base}/mcp", headers={"Accept": "text/event-stream"}
                                ),
                                stream=True,
                            )
                            took["get_status"] = held.status_code
                            started = time.monotonic()
                            proc.send_signal(signal.SIGTERM)  # the session and its streams are still open
                            await anyio.to_thread.run_sync(lambda: proc.wait(60))
                            took["exit_s"] = time.monotonic() - started
                except Exception:  # the server went away under the open session: expected here
                    pass

            anyio.run(main)
    assert proc.returncode == 0 and took["exit_s"] < 10, (took, proc.returncode)
