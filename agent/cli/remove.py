"""`ragsieve remove`: remove documents from an index by id, folder prefix or glob (the rest is kept)."""
from __future__ import annotations

import argparse

from ragsieve.agent.cli.common import add_common, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("remove", help="remove documents by id, folder prefix (docs/old/) or glob")
    p.add_argument("selectors", nargs="+", metavar="ID_PREFIX_OR_GLOB")
    add_common(p)
    p.add_argument("--lock-wait", type=float, metavar="SECONDS", help="wait this long for another build")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.cli.index import make_builder, print_report
    from ragsieve.tools.index.hybrid import HybridIndex

    with HybridIndex.open(args.index):  # a clear error for a missing index, before any work
        pass
    builder = make_builder(args, load_config(args), progress=False)
    print_report(builder.build([], remove=args.selectors))
    return 0
