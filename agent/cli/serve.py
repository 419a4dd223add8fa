"""`ragsieve serve`: answer questions over HTTP."""
from __future__ import annotations

import argparse
import sys

from ragsieve.agent.cli.common import add_common, add_llm_options, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="serve POST /ask over HTTP for a chatbot backend")
    add_common(p)
    add_llm_options(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.agent.service.server import AskServer

    config = load_config(args)
    with Orchestrator.open(args.index, config) as orch:
        server = AskServer(orch, host=args.host, port=args.port)
        print(f"ragsieve: serving {args.index} at {server.address} (POST /ask, GET /health)", file=sys.stderr)
        try:
            server.serve_forever()
        finally:
            server.close()
    return 0
