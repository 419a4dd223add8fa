"""Build the `LLM` the agent uses from an `LLMConfig`: a remote endpoint or the embedded server.

Both ways go through the same `OpenAIChat` client; the embedded way first
assembles the packaged GGUF and starts `LocalLLMServer` on 127.0.0.1.
"""

from __future__ import annotations

import logging
from typing import Callable

from ragsieve.agent.config import LLMConfig
from ragsieve.agent.llm.cache import DiskCache
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.local_server import LocalLLMServer
from ragsieve.agent.llm.model_packages import MODELS, resolve_local_model
from ragsieve.agent.llm.openai_chat import OpenAIChat, OutputMode
from ragsieve.agent.llm.redact import redact_url
from ragsieve.tools.modes import parse_enum

log = logging.getLogger(__name__)


def describe_endpoint(config: LLMConfig) -> str:
    """One line naming the endpoint `config` points at (for error messages and logs)."""
    cfg = config.resolved()
    if cfg.base_url:
        return f"OpenAI-compatible endpoint {redact_url(cfg.base_url)} (model {cfg.model or 'first listed by the server'})"
    kind = "packaged model" if cfg.local_model in MODELS else "GGUF file"
    return f"embedded llama.cpp server with {kind} {cfg.local_model} (n_ctx {cfg.n_ctx})"


def open_llm(config: LLMConfig) -> tuple[LLM, Callable[[], None]]:
    """The metered `LLM` for `config` and a function that releases it (stops the embedded server)."""
    cfg = config.resolved()
    mode = parse_enum(OutputMode, cfg.output_mode, "llm.output_mode")
    log.info("opening LLM: %s", describe_endpoint(cfg))
    server: LocalLLMServer | None = None
    if cfg.base_url:
        base_url, api_key = cfg.base_url, cfg.api_key or "not-needed"
    else:
        gguf = resolve_local_model(cfg.local_model)
        # llama.cpp divides its context among the slots: each slot gets n_ctx
        server = LocalLLMServer(gguf, n_ctx=cfg.n_ctx * cfg.parallel, n_threads=cfg.n_threads, n_parallel=cfg.parallel)
        base_url, api_key = server.base_url, "not-needed"
    try:
        chat = OpenAIChat(
            base_url,
            api_key,
            cfg.model,
            timeout_s=cfg.timeout_s,
            max_attempts=cfg.max_attempts,
            max_retry_s=cfg.max_retry_s,
            output_mode=mode,
            max_reply_bytes=cfg.max_reply_bytes,
            adaptive_timeouts=server is not None,
        )  # the embedded model: limits from its measured speed
        cache = DiskCache(cfg.cache_dir) if cfg.cache_dir else None
        llm = LLM(
            chat, cache=cache, max_tokens=cfg.max_tokens, temperature=cfg.temperature, max_prompt_tokens=cfg.max_prompt_tokens
        )
    except BaseException:
        if server is not None:
            server.close()
        raise

    def close() -> None:
        if server is not None:
            server.close()

    return llm, close
