"""`ragsieve access`: explain who may read a document, or re-label an index from an access rules file."""

from __future__ import annotations

import argparse

from ragsieve.cli.common import add_common, for_terminal
from ragsieve.tools.access.principals import AccessDefault
from ragsieve.tools.modes import choices


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("access", help="who may read which document (explain, relabel)")
    sub = p.add_subparsers(dest="access_command", required=True)
    e = sub.add_parser("explain", help="say why a principal can or cannot read a document")
    add_common(e)
    e.add_argument(
        "--as",
        dest="principals",
        action="append",
        required=True,
        metavar="PRINCIPAL",
        help="user:NAME, group:NAME or public (repeat, or comma-separated)",
    )
    e.add_argument("document", help="a document as cited (docs/finance/budget.md) or a documents-API file id")
    e.set_defaults(func=run_explain)
    r = sub.add_parser("relabel", help="apply an access rules file to an index now (nothing is embedded)")
    add_common(r)
    r.add_argument("--access-rules", metavar="FILE", help="the rules file (omit with --clear)")
    r.add_argument("--access-default", choices=choices(AccessDefault), help="what unlabelled documents are")
    r.add_argument("--clear", action="store_true", help="drop the rules (front matter and attributes stay)")
    r.set_defaults(func=run_relabel)
    return p


def run_explain(args: argparse.Namespace) -> int:
    from ragsieve.tools.access.explain import explain
    from ragsieve.tools.index.engines.open import opened

    with opened(args.index) as index:
        result = explain(index, ",".join(args.principals), args.document)
    print(for_terminal(result.text()))
    return 0 if result.allowed else 1


def apply_rules(index: str, rules_file: str | None, default: str | None, clear: bool = False) -> None:
    """Record the rules (and default) for `index` before a build or on their own (`relabel`)."""
    from ragsieve.agent.errors import UsageError
    from ragsieve.tools.access.labels import load, set_rules
    from ragsieve.tools.access.principals import AccessDefault
    from ragsieve.tools.access.rules import AccessRules

    if clear and rules_file:
        raise UsageError("--clear drops the rules: give it without --access-rules")
    chosen = AccessDefault(default) if default else None
    if rules_file:
        set_rules(index, AccessRules.read(rules_file), str(rules_file), chosen)
    elif clear or chosen is not None:
        current = load(index)
        set_rules(index, None if clear else current.rules, None if clear else current.rules_file, chosen)


def access_summary(index: str) -> str:
    from ragsieve.tools.access.explain import index_sources, summary
    from ragsieve.tools.access.labels import load
    from ragsieve.tools.index.engines.open import opened

    with opened(index) as opened_index:
        return summary(load(index), index_sources(opened_index))


def run_relabel(args: argparse.Namespace) -> int:
    from ragsieve.agent.errors import UsageError
    from ragsieve.tools.access.explain import index_sources, summary
    from ragsieve.tools.access.labels import load
    from ragsieve.tools.index.engines.open import opened

    if not (args.access_rules or args.clear or args.access_default):
        raise UsageError("relabel needs --access-rules FILE, --access-default or --clear")
    with opened(args.index) as index:  # refuses a missing index before anything is written
        sources = index_sources(index)
    apply_rules(args.index, args.access_rules, args.access_default, args.clear)
    print(for_terminal(summary(load(args.index), sources)))
    return 0
