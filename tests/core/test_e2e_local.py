"""End to end on examples/ against the real embedded llama.cpp server (the `make demo` path)."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES, REPO

pytestmark = pytest.mark.llm


def test_index_then_ask_with_the_embedded_model(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    index = tmp_path / "idx"
    built = subprocess.run(
        [sys.executable, "-m", "ragsieve", "index", str(EXAMPLES), "--index", str(index), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    asked = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragsieve",
            "ask",
            "How do I rotate the API key of a Lumen workspace?",
            "--index",
            str(index),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert asked.returncode == 0, asked.stderr
    data = json.loads(asked.stdout)
    assert data["answer"].strip()
    assert [e["step"] for e in data["trace"]] == ["retrieve", "answer"]
    assert data["usage"]["calls"] == 1 and data["usage"]["completion_tokens"] > 0
    top_sources = [e for e in data["trace"][0]["summary"]["top"]]
    assert any("key" in t["id"].lower() for t in top_sources), top_sources
    for c in data["citations"]:
        assert c["chunk_id"] in data["context"]


def test_orchestrator_fast_plan_with_local_llm(examples_index, local_llm):
    from ragsieve import Config, Orchestrator

    with Orchestrator.open(examples_index, Config(), llm=local_llm) as orch:
        answer = orch.ask("How are webhook signatures verified?")
    assert answer.answer.strip()
    assert answer.usage.calls == 1
    assert len(answer.context) == Config().retrieval.top_k
