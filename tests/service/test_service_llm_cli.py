"""A second client nobody here wrote: Simon Willison's `llm` CLI with an OpenAI-compatible model entry."""

from __future__ import annotations

import os
import subprocess
import sys

from ragsieve.testing import FakeChat
from tests.support.service_fakes import ANSWER, served

QUESTION = "How do I rotate the API key of a Lumen workspace?"


def run_llm(svc, tmp_path, *args):
    (tmp_path / "extra-openai-models.yaml").write_text(
        f'- model_id: ragsieve-demo\n  model_name: demo\n  api_base: "{svc.base_url}/v1"\n  api_key_name: ragsieve\n'
    )
    (tmp_path / "keys.json").write_text('{"ragsieve": "key-llm-cli-1234"}')
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "llm", "-m", "ragsieve-demo", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_llm_cli_streaming_and_not(examples_index, tmp_path):
    from ragsieve.service.auth.keys import KeyRing

    chat = FakeChat(default=ANSWER, token_delay_s=0.002)
    with served({"demo": examples_index}, chat, keys=KeyRing({"key-llm-cli-1234": {"*"}})) as svc:
        streamed = run_llm(svc, tmp_path, QUESTION)
        assert streamed.returncode == 0, streamed.stderr
        assert "Rotate it with `lumen keys rotate` [1]" in streamed.stdout and "**Sources**" in streamed.stdout
        assert chat.history[-1].get("stream") is True
        plain = run_llm(svc, tmp_path, "--no-stream", QUESTION)
        assert plain.returncode == 0 and plain.stdout == streamed.stdout
        # a follow-up in the same conversation (`llm -c`) sends the history; the server rewrites it
        follow = run_llm(svc, tmp_path, "-c", "and what about the old key?")
        assert follow.returncode == 0, follow.stderr
        rewrite_prompt = chat.history[-2]["messages"][-1]["content"]
        assert "stand-alone question" in rewrite_prompt and QUESTION in rewrite_prompt
