"""`ragsieve search`: retrieval only (no model started): ranked hits with citation labels and snippets."""

from __future__ import annotations

import argparse
import json

from ragsieve.agent.core.locations import label, snippet
from ragsieve.cli.common import add_common, for_terminal, load_config
from ragsieve.tools.modes import RankingMode, choices


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("search", help="hybrid search without a model: ranked chunks with citations")
    p.add_argument("query")
    add_common(p)
    p.add_argument("--top-k", type=int, default=10, help="hits to show (1..100)")
    p.add_argument("--json", action="store_true", help="one JSON object: the hits with scores and text")
    p.add_argument(
        "--ranking",
        choices=choices(RankingMode),
        default=None,
        help="source-first: definitions in source files before other code, tests and prose "
        "(for 'where is X implemented'); default: the index config's retrieval.ranking (hybrid)",
    )
    add_filters(p)
    p.set_defaults(func=run)
    return p


def add_filters(p: argparse.ArgumentParser) -> None:
    """`--where` (metadata) and `--as` (a caller's principals): what `search` and `ask` may read."""
    p.add_argument(
        "--where",
        action="append",
        metavar="FIELD=VALUE",
        help="only chunks whose metadata match (repeatable, all must match): source=PATH, "
        "path_prefix=docs/api/, language=python, kind=markdown, tenant=NAME, "
        "symbol_kind=function|method|class|attribute (chunks defining one)",
    )
    p.add_argument(
        "--as",
        dest="reading_as",
        action="append",
        metavar="PRINCIPAL",
        help="answer as this caller: only documents user:NAME / group:NAME may read (repeat or "
        "comma-separate; docs/access.md). Without it the CLI reads everything",
    )


def reading_as(where, items: list[str] | None):
    """`where` narrowed to what the `--as` principals may read (unchanged without --as)."""
    if not items:
        return where
    from ragsieve.tools.access.principals import principals
    from ragsieve.tools.index.search.where import Where

    return (where or Where()).reading_as(principals(",".join(items)))


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.errors import UsageError
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.search.where import Where

    where = reading_as(Where.parse(args.where), args.reading_as)
    if not 1 <= args.top_k <= 100:
        raise UsageError(f"--top-k must be in 1..100, got {args.top_k}")
    config = load_config(args)
    with Orchestrator.open(args.index, config) as orch:  # the LLM is opened lazily: never here
        hits = orch.retrieve(args.query, top_k=args.top_k, where=where, ranking=args.ranking)
    if args.json:
        from ragsieve.tools.access.labels import load

        labels = load(args.index)  # the CLI is the index's administrator: it sees who may read each hit
        print(
            json.dumps(
                {
                    "query": args.query,
                    "hits": [
                        {
                            "rank": h.rank,
                            "label": label(h.chunk),
                            "chunk_id": h.chunk_id,
                            "score": round(h.score, 6),
                            "bm25_rank": h.bm25_rank,
                            "dense_rank": h.dense_rank,
                            "source": h.chunk.source,
                            "line_start": h.chunk.line_start,
                            "line_end": h.chunk.line_end,
                            "symbol": h.chunk.symbol,
                            "access": {"readers": list((d := labels.decide(h.chunk.source)).readers), "from": d.origin},
                            "text": h.chunk.text,
                        }
                        for h in hits
                    ],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    for h in hits:
        print(for_terminal(f"{h.rank:>3}. {label(h.chunk)}  score {h.score:.3f}"))
        print(for_terminal(f"     {snippet(h.chunk.text)}"))
    if not hits:
        print("no hits")
    return 0
