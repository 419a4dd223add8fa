"""The HTTP API: ask, health, and clear errors for bad requests and model faults."""
import json
import urllib.error
import urllib.request

import pytest

from ragsieve import Config, Orchestrator
from ragsieve.agent.errors import EndpointError
from ragsieve.agent.llm.fake import FakeChat
from ragsieve.agent.service.server import AskServer


def _post(url, body: bytes):
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture()
def served(examples_index):
    chat = FakeChat(["Use `lumen keys rotate` [1].", EndpointError("endpoint down", base_url="http://x")])
    orch = Orchestrator.open(examples_index, Config(), chat=chat)
    server = AskServer(orch, port=0).start()
    yield server, chat
    server.close()
    orch.close()


def test_ask_health_and_errors(served):
    server, chat = served
    status, body = _post(server.address + "/ask", json.dumps({"question": "rotate key?"}).encode())
    assert status == 200 and body["answer"] == "Use `lumen keys rotate` [1]."
    assert [e["step"] for e in body["trace"]] == ["retrieve", "answer"] and body["citations"][0]["number"] == 1
    assert "rotate key?" in chat.history[0]["messages"][0]["content"]

    status, body = _post(server.address + "/ask", json.dumps({"question": "second"}).encode())
    assert status == 502 and "endpoint down" in body["error"]

    assert _post(server.address + "/ask", b"{not json")[0] == 400
    status, body = _post(server.address + "/ask", json.dumps({"question": "  "}).encode())
    assert status == 400 and "empty" in body["error"]
    status, body = _post(server.address + "/ask", json.dumps({"question": "q", "plan": "nope"}).encode())
    assert status == 400 and "unknown plan" in body["error"]
    assert len(chat.history) == 2

    with urllib.request.urlopen(server.address + "/health", timeout=10) as response:
        health = json.loads(response.read())
    assert health["status"] == "ok" and health["chunks"] > 0 and "agentic" in health["plans"]
