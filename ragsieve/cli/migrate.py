"""`ragsieve migrate`: serve an existing index from another backend without embedding anything again."""

from __future__ import annotations

import argparse
import os

from ragsieve.cli.common import add_common, for_terminal, require_index_folder
from ragsieve.tools.modes import Backend, choices


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("migrate", help="copy an index to another backend (local -> milvus), no re-embedding")
    p.add_argument("--from", dest="source", choices=["local"], default="local")
    p.add_argument("--to", dest="target", choices=choices(Backend), required=True)
    p.add_argument(
        "--uri",
        help="milvus: a milvus-lite file, http://host:19530 or a Zilliz URI "
        "(default <index>/milvus.db; token from env RAGSIEVE_MILVUS_TOKEN)",
    )
    p.add_argument("--name", help="milvus collection name prefix (default: the index folder's name)")
    p.add_argument("--index-type", default="FLAT", help="milvus dense index type (FLAT, HNSW, ...)")
    add_common(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    require_index_folder(args.index)
    if args.target == "local":  # back to the in-process index: stop reading from Milvus
        pointer = Path(args.index) / "milvus.json"
        if pointer.is_file():
            pointer.unlink()
        print(f"{args.index}: served by the local backend")
        return 0
    from ragsieve.tools.index.milvus.publish import publish

    info = publish(
        args.index, uri=args.uri, token=os.environ.get("RAGSIEVE_MILVUS_TOKEN"), name=args.name, index_type=args.index_type
    )
    print(
        for_terminal(
            f"migrated {info['rows']} chunks of {info['generation']} to Milvus {info['uri']} "
            f"as {info['collection']} (no re-embedding)"
        )
    )
    return 0
