"""`ragsieve mcp`: the MCP server over stdio, for coding agents that start it (Claude Code, Cursor, VS Code)."""

from __future__ import annotations

import argparse

from ragsieve.cli.common import add_config_option, add_llm_options, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "mcp",
        help="serve the indexes to a coding agent over MCP (stdio): tools search, ask, read, indexes",
        description="Speaks the Model Context Protocol on stdin/stdout; the agent starts this command. "
        "Over HTTP, `ragsieve serve` offers the same tools at /mcp.",
    )
    p.add_argument(
        "--index",
        action="append",
        required=True,
        metavar="NAME=DIR",
        help="an index to serve (repeat for several); a bare DIR is named after its folder",
    )
    add_config_option(p)
    add_llm_options(p)
    p.add_argument("--max-concurrent", type=int, default=2, help="`ask` calls answered at once")
    p.add_argument("--request-timeout", type=float, default=300.0, help="seconds per `ask`")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    import anyio

    from ragsieve.agent.errors import UsageError
    from ragsieve.service.common.insights_hook import open_insights
    from ragsieve.service.indexes.registry import IndexRegistry, parse_index_specs
    from ragsieve.service.mcp.server import build_mcp

    if not 1 <= args.max_concurrent <= 64 or not 0 < args.request_timeout <= 3600:
        raise UsageError("--max-concurrent must be in 1..64 and --request-timeout in (0, 3600] seconds")
    config = load_config(args)
    _protocol_only_stdout()
    registry = IndexRegistry(parse_index_specs(args.index), config)
    try:
        registry.insights = open_insights(registry, None)  # [insights] dir: stdio has no --data-dir
        registry.watch()
        server = build_mcp(registry, limiter=anyio.CapacityLimiter(args.max_concurrent), timeout_s=args.request_timeout)
        server.run("stdio")
    finally:
        registry.close()
    return 0


def _protocol_only_stdout() -> None:
    """stdout carries the protocol: anything else writing to file descriptor 1 (a native library, a progress
    bar) goes to stderr instead, and only the MCP transport writes to the real stdout."""
    import os
    import sys

    real = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(real, "w", encoding="utf-8", newline="\n")
