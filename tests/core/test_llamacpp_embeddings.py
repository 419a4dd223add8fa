"""A real llama.cpp embeddings endpoint through the `openai` provider, end to end: index, search, ask.

The embedded xllamacpp server starts on the packaged Qwen2.5-Coder 0.5B GGUF with
embeddings on (mean pooling) and serves both /v1/embeddings and the chat calls
of `ask`. Slow (a real model on the CPU): one server for the module, three short
documents, one short answer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def llamacpp():
    from ragsieve.agent.llm.local_server import LocalLLMServer
    from ragsieve.agent.llm.model_packages import resolve_local_model

    with LocalLLMServer(resolve_local_model("qwen2.5-coder-0.5b"), n_ctx=2048, n_parallel=1, embeddings=True) as server:
        yield server


def test_index_search_and_ask_with_llamacpp_embeddings(llamacpp, tmp_path, capsys):
    from ragsieve.agent.config import Config, LLMConfig
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.cli.main import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keys.md").write_text(
        "# API keys\n\nRotate a workspace API key with `lumen keys rotate`. The old key "
        "keeps working for 24 hours, then it expires.\n"
    )
    (docs / "hooks.md").write_text(
        "# Webhooks\n\nEvery webhook request carries an X-Lumen-Signature header, an HMAC-SHA256 of the body.\n"
    )
    (docs / "tea.md").write_text("# Tea\n\nThe office tea ceremony starts at four o'clock in the garden.\n")
    folder = tmp_path / "index"
    assert (
        main(
            [
                "index",
                str(docs),
                "--index",
                str(folder),
                "--embed-base-url",
                llamacpp.base_url,
                "--embed-model",
                "qwen2.5-coder-0.5b",
                "--no-progress",
            ]
        )
        == 0
    )
    gen = (folder / "CURRENT").read_text().strip()
    record = json.loads((folder / gen / "manifest.json").read_text())["embedding"]
    assert record["provider"] == "openai" and record["base_url"] == llamacpp.base_url
    assert record["model"] == "qwen2.5-coder-0.5b" and record["dimension"] == 896
    from ragsieve.tools.index.local.index import HybridIndex

    with HybridIndex.open(folder) as index:  # the vectors of whichever layout the generation has
        vectors = np.array(index.vectors)
    assert vectors.shape == (3, 896) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    capsys.readouterr()

    assert main(["search", "tea ceremony in the garden", "--index", str(folder), "--json", "--top-k", "3"]) == 0
    found = json.loads(capsys.readouterr().out)
    hits = found["hits"] if isinstance(found, dict) else found
    assert len(hits) == 3 and "tea.md" in json.dumps(hits[0])

    config = Config(llm=LLMConfig(base_url=llamacpp.base_url, max_tokens=24, timeout_s=300, max_retry_s=300))
    with Orchestrator.open(folder, config) as orch:
        dense = orch.index.dense.search(orch.index.embed_query("How do I rotate the API key?"), 3)
        assert orch.index.store.get(dense[0][0]).doc_id.endswith("keys.md")  # the endpoint's own vectors decide
        answer = orch.ask("How do I rotate the API key?", plan="fast")
    assert [e.step for e in answer.trace] == ["retrieve", "answer"]
    assert answer.answer.strip() and answer.usage.calls == 1
    assert any(h.chunk.doc_id.endswith("keys.md") for h in answer.context)
