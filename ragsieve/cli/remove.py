"""`ragsieve remove`: take documents out of an index explicitly (adding paths never removes)."""

from __future__ import annotations

import argparse

from ragsieve.cli.common import add_common, load_config, require_index_folder


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("remove", help="remove documents (by id or folder prefix) from an index")
    p.add_argument(
        "ids",
        nargs="+",
        metavar="ID_OR_PREFIX",
        help="a document id as cited (examples/docs/api-keys.md) or a folder prefix (examples/docs)",
    )
    add_common(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.tools.index.building.builder import IndexBuilder

    config = load_config(args)
    require_index_folder(args.index)
    ic = config.index
    builder = IndexBuilder(
        args.index,
        lock_wait_s=ic.lock_wait_s,
        chunk_tokens=ic.chunk_tokens,
        embedding_model=ic.embedding_model,
        faiss_index=ic.faiss_index,
        bm25_engine=ic.bm25_engine,
        sparse_percentile=ic.sparse_percentile,
        progress=False,
    )
    report = builder.remove(args.ids)
    print(report.summary())
    return 0
