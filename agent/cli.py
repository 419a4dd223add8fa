"""`ragsieve` command line: index, ask, plans, serve, calibrate, eval."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from agent.config import Config
from agent.errors import RagsieveError

log = logging.getLogger("ragsieve")


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


def cmd_index(args: argparse.Namespace) -> int:
    from tools.index_builder import IndexBuilder

    config = load_config(args)
    ic = config.index
    builder = IndexBuilder(
        args.index,
        chunk_tokens=args.chunk_tokens or ic.chunk_tokens,
        embedding_model=args.embedding_model or ic.embedding_model,
        faiss_index=args.faiss or ic.faiss_index,
        bm25_engine=args.bm25 or ic.bm25_engine,
        batch_size=ic.embed_batch_size,
        sparse_threshold=ic.sparse_threshold,
        sparse_rare_terms=ic.sparse_rare_terms,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    report = builder.build(args.paths, rebuild=args.rebuild)
    print(report.load_summary)
    print(report.summary())
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from agent.orchestrator import Orchestrator

    config = load_config(args)
    if args.plot:
        config = config.model_copy(update={"outliers": config.outliers.model_copy(update={"plot": args.plot})})
    with Orchestrator.open(args.index, config) as orch:
        answer = orch.ask(args.question, plan=args.plan)
    if args.json:
        print(json.dumps(answer.public(), indent=2, ensure_ascii=False, default=str))
        return 0
    print(answer.answer)
    if answer.citations:
        print("\nSources:")
        for c in answer.citations:
            print(f"  [{c.number}] {c.label()}" + (f"  ({c.title})" if c.title else ""))
    if "coverage" in answer.notes:
        print(f"\n(context calibrated for coverage {answer.notes['coverage']})")
    u = answer.usage
    print(f"\n(plan {answer.plan}: {u.calls} LLM calls, {u.prompt_tokens}+{u.completion_tokens} tokens, "
          f"{u.latency_s:.1f}s in the model)", file=sys.stderr)
    return 0


def cmd_plans(args: argparse.Namespace) -> int:
    from agent.plans import get_plan, plan_names

    config = load_config(args)
    for name in plan_names(config):
        spec = get_plan(name, config)
        edges = "; ".join(f"{s} -> " + ", ".join(f"{o}:{t}" for o, t in e.items()) for s, e in spec.transitions.items())
        print(f"{name}: start {spec.start}; {edges}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from agent.orchestrator import Orchestrator
    from agent.server import AskServer

    config = load_config(args)
    with Orchestrator.open(args.index, config) as orch:
        server = AskServer(orch, host=args.host, port=args.port)
        print(f"ragsieve: serving {args.index} at {server.address} (POST /ask, GET /health)", file=sys.stderr)
        try:
            server.serve_forever()
        finally:
            server.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsieve", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", help="index files, folders and BEIR corpus.jsonl[.gz]")
    p.add_argument("paths", nargs="+", help="files or folders")
    add_common(p)
    p.add_argument("--chunk-tokens", type=int, help="chunk size in tokens (default from config: 200)")
    p.add_argument("--embedding-model", help="sentence-transformers model name or path")
    p.add_argument("--faiss", choices=["flat", "hnsw"], help="FAISS index kind")
    p.add_argument("--bm25", choices=["bm25s", "rank_bm25"], help="BM25 engine")
    p.add_argument("--rebuild", action="store_true", help="rebuild from scratch (e.g. to change the embedding model)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("ask", help="answer a question from an index, with citations")
    p.add_argument("question")
    add_common(p)
    add_llm_options(p)
    p.add_argument("--plan", help="plan name (fast, agentic, full, or one from the config)")
    p.add_argument("--json", action="store_true", help="print {answer, citations, trace, usage} as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="full plan: plot the GMM outlier filter's view of the context")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("plans", help="list the plans and their transitions")
    add_common(p, index_required=False)
    p.set_defaults(func=cmd_plans)

    p = sub.add_parser("serve", help="serve POST /ask over HTTP for a chatbot backend")
    add_common(p)
    add_llm_options(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=cmd_serve)

    for module in _extensions():
        module.add_parser(sub)
    return parser


def _extensions():
    from agent import cli_calibrate, cli_eval

    return [cli_calibrate, cli_eval]


def main(argv: list[str] | None = None) -> int:
    # The application (not the library) quiets third-party download/loading bars.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG if args.verbose > 1 else logging.INFO,
                            format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except RagsieveError as exc:
        print(f"ragsieve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ragsieve: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
