"""`ragsieve` command line: index, ask, plans, serve, calibrate, eval (one module per command)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from ragsieve.agent.errors import RagsieveError
from ragsieve.agent.llm.redact import RedactingFilter, redact
from ragsieve.cli import access, ask, calibrate, feedback, index, insights, mcp, migrate, plans, remove, search, serve
from ragsieve.cli import eval as evaluate
from ragsieve.cli.common import for_terminal

COMMANDS = (index, remove, search, ask, plans, serve, mcp, calibrate, evaluate, migrate, feedback, insights, access)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsieve", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


# the library logs its slow one-time steps at INFO; the CLI shows them without -v (with -v they come as any record)
PROGRESS_LOGGER = "ragsieve.tools.index.embedders.onnx_encoder"


def _show_progress(logger: logging.Logger, secrets: tuple[str, ...]) -> None:
    for old in [h for h in logger.handlers if getattr(h, "ragsieve_progress", False)]:  # main() called again
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.ragsieve_progress = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("ragsieve: %(message)s"))
    handler.addFilter(RedactingFilter(secrets))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    # The application (not the library) quiets third-party download/loading bars.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    secrets: tuple[str, ...] = ()  # URL passwords and the API keys in the environment are always masked
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:  # warnings too: secrets are masked in every record
        handler.addFilter(RedactingFilter(secrets))
        handler.setLevel(logging.getLogger().level)  # bm25s sets its own logger to DEBUG when imported
    # milvus-lite's in-process gRPC server logs a traceback for every RPC it lacks (AllocTimestamp, asked by
    # pymilvus on connect, which then carries on): not a fault of the user's, so not shown
    logging.getLogger("grpc._server").addFilter(lambda r: "Method not implemented" not in r.getMessage())
    if not args.verbose:  # the one-time encoder export takes seconds: say so, as a progress line, on stderr
        _show_progress(logging.getLogger(PROGRESS_LOGGER), secrets)
    try:
        return args.func(args)
    except RagsieveError as exc:
        message = " ".join(str(exc).split("\n"))  # one line
        print(for_terminal(f"ragsieve: error: {redact(message, secrets)}"), file=sys.stderr)
        json_error(args, type(exc).__name__, redact(message, secrets))
        return 2
    except KeyboardInterrupt:
        print("ragsieve: interrupted", file=sys.stderr)
        json_error(args, "KeyboardInterrupt", "interrupted")
        return 130
    except Exception as exc:  # a bug: the JSON reader still gets JSON, then the traceback
        json_error(args, type(exc).__name__, redact(" ".join(str(exc).split("\n")), secrets))
        raise


def json_error(args: argparse.Namespace, kind: str, message: str) -> None:
    """With `--json`, a failure is JSON on stdout too (`{"error": {"type", "message"}}`): a script reading the
    output always gets JSON, whatever ended the command."""
    if getattr(args, "json", False) is True:
        print(json.dumps({"error": {"type": kind, "message": message}}, ensure_ascii=True), flush=True)


if __name__ == "__main__":
    sys.exit(main())
