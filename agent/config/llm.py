"""The `[llm]` and `[budget]` sections: the model endpoint (or the embedded model) and what a question may spend."""

from __future__ import annotations

import os

from pydantic import Field

from ragsieve.agent.config.base import _Section


class LLMConfig(_Section):
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    local_model: str = "qwen2.5-coder-0.5b"  # a named packaged model or a GGUF path
    # context of each parallel slot of the embedded server: 2 slots x 16,384 = 32,768 tokens, the packaged
    # Qwen2.5-Coder models' trained context (the coverage guarantee needs room: docs/full-plan.md)
    n_ctx: int = Field(16384, ge=512)
    context_window: int | None = Field(None, ge=512)  # a configured endpoint's context window (None: n_ctx)
    parallel: int = Field(2, ge=1, le=64)  # the embedded server's parallel slots (concurrent requests)
    n_threads: int | None = Field(None, ge=1)  # None: the cores the load leaves idle (local_server.default_threads)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1)
    # inactivity timeout: a stream is cut when no token arrives for this long; a plain call may take this long
    # in all, or (embedded model) what its measured prompt/generation rates predict when that is longer
    timeout_s: float = Field(120.0, gt=0)
    max_reply_bytes: int = Field(4_000_000, ge=1024, le=1_000_000_000)  # a longer reply body is refused
    max_prompt_tokens: int = Field(32_000, ge=256)  # a prompt over this (count_tokens) is refused before sending
    max_attempts: int = Field(5, ge=1, le=20)
    # no new attempt starts after this many seconds in all: above timeout_s, so a timed-out call is retried
    max_retry_s: float = Field(300.0, gt=0)
    output_mode: str = "auto"  # auto | json_schema | json_object | text
    cache_dir: str | None = None

    def resolved(self) -> "LLMConfig":
        env = os.environ
        return self.model_copy(
            update={
                "base_url": self.base_url or env.get("RAGSIEVE_BASE_URL") or env.get("OPENAI_BASE_URL"),
                "api_key": self.api_key or env.get("RAGSIEVE_API_KEY") or env.get("OPENAI_API_KEY"),
                "model": self.model or env.get("RAGSIEVE_MODEL") or env.get("OPENAI_MODEL"),
            }
        )


class BudgetConfig(_Section):
    """What one question may spend across every step (`ragsieve.agent.llm.budget`); None: no limit."""

    deadline_s: float | None = Field(600.0, gt=0)  # wall clock for the whole question, retries included
    llm_calls: int | None = Field(100, ge=1)
    tokens: int | None = Field(400_000, ge=1000)
