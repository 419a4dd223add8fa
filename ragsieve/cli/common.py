"""What every command shares: the config (TOML file plus command-line overrides) and common options."""

from __future__ import annotations

import argparse
import re

from ragsieve.agent.config import Config

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def for_terminal(text: str) -> str:
    """Model or document text made safe to print: escape sequences and control characters removed
    (newlines and tabs kept), so no reply can clear the screen, retitle the window or reorder text."""
    return _CONTROLS.sub("", _ESCAPES.sub("", str(text)))


def plural(count: int, noun: str) -> str:
    """`1 LLM call`, `2 LLM calls`, `0 LLM calls`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def range_checked(section, **values):
    """`section` (a config model) with the command-line `values` that were given, validated by the
    same field constraints as the config file: `--chunk-tokens 0` is refused, never replaced."""
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return section
    from pydantic import ValidationError

    from ragsieve.agent.errors import UsageError

    try:
        return type(section).model_validate(section.model_dump() | given)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')} {e['input']!r}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(f"invalid option: {problems}") from None


def load_config(args: argparse.Namespace) -> Config:
    config = Config.load(getattr(args, "config", None))
    llm_updates = {
        k: v
        for k, v in {
            "base_url": getattr(args, "base_url", None),
            "model": getattr(args, "model", None),
            "local_model": getattr(args, "local_model", None),
        }.items()
        if v
    }
    if llm_updates:
        config = config.model_copy(update={"llm": config.llm.model_copy(update=llm_updates)})
    from ragsieve.service.middleware.tracing import start

    start(config)  # [tracing] and OTEL_EXPORTER_OTLP_ENDPOINT: applied, or refused in one line, before any work
    return config


def add_common(parser: argparse.ArgumentParser, *, index_required: bool = True) -> None:
    """Options every one-index subcommand shares: the index folder and a TOML config file."""
    parser.add_argument("--index", required=index_required, metavar="DIR", help="index folder")
    add_config_option(parser)


def require_index_folder(folder: str) -> None:
    """A command that writes into an existing index (remove, migrate) refuses a folder that does not exist, in
    one line, before it takes the index's lock (which would create the folder)."""
    from pathlib import Path

    from ragsieve.agent.errors import IndexMissingError

    if not Path(folder).is_dir():
        raise IndexMissingError(f"no index at {folder}: the folder does not exist (build it with `ragsieve index`)")


def add_config_option(parser: argparse.ArgumentParser, help: str = "TOML config file (docs/configuration.md)") -> None:
    """`--config FILE`, read by `load_config` (also for `serve` and `mcp`, whose `--index` takes NAME=DIR)."""
    parser.add_argument("--config", metavar="FILE", help=help)


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: env OPENAI_BASE_URL, else the embedded model)")
    parser.add_argument("--model", help="model name at the endpoint (default: env OPENAI_MODEL or the server's first model)")
    parser.add_argument("--local-model", help="embedded model: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b or a GGUF path")


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """`--device`: where the local embedding model (and a cross-encoder reranker) runs."""
    parser.add_argument(
        "--device",
        metavar="DEVICE",
        help="auto (a GPU torch sees, else the CPU), cpu, cuda, cuda:N or mps: where the local "
        "embedding model and cross-encoder reranker run (default from config: auto)",
    )


def with_device(config: Config, device: str | None) -> Config:
    """`config` with `--device` applied to [index] device (queries and, unless [rerank] names one, reranking)."""
    if device is None:
        return config
    from ragsieve.tools.index.embedders.device import resolve_device

    index = range_checked(config.index, device=device)
    resolve_device(index.device)  # a GPU named but absent is refused now, in one line, not at the first question
    return config.model_copy(update={"index": index})
