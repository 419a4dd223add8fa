"""What every command shares: the config (TOML file plus command-line overrides) and common options."""
from __future__ import annotations

import argparse

from ragsieve.agent.config import Config


def load_config(args: argparse.Namespace) -> Config:
    config = Config.load(getattr(args, "config", None))
    llm_updates = {k: v for k, v in {
        "base_url": getattr(args, "base_url", None),
        "model": getattr(args, "model", None),
        "local_model": getattr(args, "local_model", None),
    }.items() if v}
    if llm_updates:
        config = config.model_copy(update={"llm": config.llm.model_copy(update=llm_updates)})
    return config


def add_common(parser: argparse.ArgumentParser, *, index_required: bool = True) -> None:
    """Options every subcommand shares: the index folder and a TOML config file."""
    parser.add_argument("--index", required=index_required, metavar="DIR", help="index folder")
    parser.add_argument("--config", metavar="FILE", help="TOML config file (see README)")


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: env OPENAI_BASE_URL, else the embedded model)")
    parser.add_argument("--model", help="model name at the endpoint (default: env OPENAI_MODEL or the server's first model)")
    parser.add_argument("--local-model", help="embedded model: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b or a GGUF path")
