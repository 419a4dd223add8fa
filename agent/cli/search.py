"""`ragsieve search`: retrieval only (no model started): ranked hits with citation, scores and a snippet."""
from __future__ import annotations

import argparse
import json

from ragsieve.agent.cli.common import add_common, for_terminal, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("search", help="ranked passages for a query, no LLM (\"where is X?\")")
    p.add_argument("query")
    add_common(p)
    p.add_argument("--top-k", type=int, default=10, help="number of hits (default 10)")
    p.add_argument("--snippet-chars", type=int, default=240, help="snippet length in characters (default 240)")
    p.add_argument("--json", action="store_true", help="print the hits as JSON")
    p.set_defaults(func=run)
    return p


def snippet(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars].rsplit(" ", 1)[0] + " ..."


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.errors import UsageError
    from ragsieve.agent.orchestrator import Orchestrator

    if args.top_k < 1 or args.snippet_chars < 1:
        raise UsageError(f"--top-k and --snippet-chars must be >= 1, got {args.top_k} and {args.snippet_chars}")
    with Orchestrator.open(args.index, load_config(args)) as orch:
        hits = orch.retrieve(args.query, top_k=args.top_k)
    rows = [{"rank": h.rank, "citation": h.chunk.label(), "chunk_id": h.chunk_id, "score": round(h.score, 6),
             "bm25_score": h.bm25_score, "dense_score": h.dense_score, "title": h.chunk.title,
             "snippet": snippet(h.chunk.text, args.snippet_chars)} for h in hits]
    if args.json:
        print(json.dumps({"query": args.query, "hits": rows}, ensure_ascii=False))
        return 0
    if not rows:
        print("no hits")
    for row in rows:
        print(for_terminal(f"{row['rank']:>3}. {row['citation']}  score {row['score']:.4f}"))
        print(for_terminal(f"     {row['snippet']}"))
    return 0
