"""`ragsieve serve`: an OpenAI-compatible chat API (and ragsieve's own routes) over one or more indexes."""

from __future__ import annotations

import argparse
import logging
import sys

from ragsieve.cli.common import add_config_option, add_device_option, add_llm_options, load_config, with_device

log = logging.getLogger(__name__)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve",
        help="serve the OpenAI chat API (/v1/chat/completions, /v1/models) and /v1/ask over HTTP",
        description="Each --index NAME=DIR becomes the model ids NAME and NAME:PLAN for chat front ends.",
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
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--workers", type=int, default=1, help="server processes (each opens the indexes and the model)")
    p.add_argument(
        "--keys-file",
        metavar="FILE",
        help='TOML [keys] table: "key" = ["index", ...] (also: env RAGSIEVE_API_KEYS=key1,key2 for every index)',
    )
    p.add_argument(
        "--allow-public-without-keys", action="store_true", help="serve a non-loopback address with no API key (an open API)"
    )
    p.add_argument("--max-concurrent", type=int, default=4, help="questions answered at once")
    p.add_argument("--queue-limit", type=int, default=16, help="questions waiting beyond that (more get 429)")
    p.add_argument(
        "--llm-parallel", type=int, default=4, help="LLM calls at once; the embedded model gets as many parallel slots"
    )
    p.add_argument("--request-timeout", type=float, default=120.0, help="seconds per question, queueing included")
    p.add_argument("--max-body-bytes", type=int, default=1_000_000)
    p.add_argument(
        "--shutdown-grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="after SIGTERM, how long answers in flight may finish (streams then end with an error)",
    )
    p.add_argument(
        "--data-dir",
        default=".ragsieve-data",
        metavar="DIR",
        help="where the documents API keeps uploaded files and vector stores, and the chat page its "
        "feedback (SQLite) and link secret (default: %(default)s; '' turns both off)",
    )
    p.add_argument("--max-file-bytes", type=int, default=20_000_000, help="largest file one upload may carry")
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API (repeat); none by default",
    )
    add_device_option(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ragsieve.tools.extras import SERVER_MODULES, Extra, require_all

    require_all(Extra.SERVER, SERVER_MODULES, "ragsieve serve")  # before any work: one line, not a traceback

    from ragsieve.service.auth.keys import KeyRing
    from ragsieve.service.indexes.registry import IndexRegistry, parse_index_specs
    from ragsieve.service.server import check_exposure, serve_foreground, serve_workers
    from ragsieve.service.settings import ServiceSettings

    try:
        settings = ServiceSettings(
            host=args.host,
            port=args.port,
            workers=args.workers,
            max_concurrent=args.max_concurrent,
            queue_limit=args.queue_limit,
            llm_parallel=args.llm_parallel,
            request_timeout_s=args.request_timeout,
            max_body_bytes=args.max_body_bytes,
            graceful_shutdown_s=args.shutdown_grace,
            cors_origins=args.cors_origin,
            allow_public_without_keys=args.allow_public_without_keys,
            data_dir=args.data_dir or None,
            max_file_bytes=args.max_file_bytes,
        )
    except ValidationError as exc:
        from ragsieve.agent.errors import UsageError

        raise UsageError(f"invalid serve option: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    config = with_device(load_config(args), args.device)
    indexes = parse_index_specs(args.index)
    keys = KeyRing.load(args.keys_file)
    keys.check_names(set(indexes))
    from ragsieve.service.auth.widget_keys import WidgetKeys

    widget_keys = WidgetKeys.load(args.keys_file)
    widget_keys.check_names(set(indexes))
    check_exposure(settings, keys)
    unknown = sorted(set(config.insights.indexes) - set(indexes))
    if config.insights.enabled and (unknown or not (config.insights.dir or settings.data_dir)):
        from ragsieve.agent.errors import UsageError

        raise UsageError(
            f"[insights] indexes names unknown index(es) {unknown}"
            if unknown
            else "[insights] enabled needs a place for the question log: [insights] dir or --data-dir"
        )
    names = ", ".join(indexes)
    where = f"http://{settings.host}:{settings.port}/v1"
    if settings.workers > 1:  # each worker process sends its access lines to stderr (factory.app_from_env)
        spec = {
            "indexes": {k: str(v) for k, v in indexes.items()},
            "config": config.model_dump(mode="json"),
            "settings": settings.model_dump(mode="json"),
            "keys_file": args.keys_file,
        }
        print(
            f"ragsieve: serving {names} at {where} with {settings.workers} workers; chat page at {where[:-3]}/", file=sys.stderr
        )
        serve_workers(spec, settings)
        return 0
    from ragsieve.service.app import create_app
    from ragsieve.service.middleware import access_log
    from ragsieve.service.server import bind

    sock = bind(settings.host, settings.port)  # a busy port is reported before the indexes load
    try:
        registry = IndexRegistry(indexes, config, llm_parallel=settings.llm_parallel)
    except BaseException:
        sock.close()
        raise
    app = create_app(registry, settings, keys, close_registry=True, widget_keys=widget_keys)
    access_log.to_stderr()  # one line per request on stderr, whatever -v says
    auth = "API keys required" if keys.enabled else "no API key (loopback)"
    where = f"http://{settings.host}:{sock.getsockname()[1]}/v1"
    print(
        f"ragsieve: serving {names} at {where} (OpenAI chat API; models: "
        f"{', '.join(registry.model_ids()[:4])}{' ...' if len(registry.model_ids()) > 4 else ''}; {auth}); "
        + (f"MCP at {where[:-3]}/mcp" if app.state.mcp is not None else "no MCP (pip install 'ragsieve[mcp]')")
        + (f"; documents API (files in {settings.data_dir})" if settings.data_dir else ""),
        file=sys.stderr,
    )
    print(f"ragsieve: chat page at {where[:-3]}/ (widget: {where[:-3]}/widget.js)", file=sys.stderr)
    if registry.insights is not None:
        print(
            f"ragsieve: insights of {', '.join(sorted(registry.insights.names))} at {where[:-3]}/insights "
            f"(question log {registry.insights.log.path}, redacted, kept {config.insights.retention_days:g} days)",
            file=sys.stderr,
        )
    serve_foreground(app, settings, sock)
    return 0
