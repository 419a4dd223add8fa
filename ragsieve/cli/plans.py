"""`ragsieve plans`: list the plans and their transitions."""

from __future__ import annotations

import argparse

from ragsieve.cli.common import add_common, load_config


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plans", help="list the plans and their transitions")
    add_common(p, index_required=False)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.plan.plans import get_plan, plan_names

    config = load_config(args)
    from ragsieve.agent.errors import UsageError

    for name in plan_names(config):
        try:
            spec = get_plan(name, config)
        except UsageError as exc:  # e.g. a +rerank plan without a reranker: listed with the reason
            print(f"{name}: not usable with this configuration: {exc}")
            continue
        edges = "; ".join(
            f"{s} -> " + ", ".join(f"{o}:{getattr(t, 'value', t)}" for o, t in e.items()) for s, e in spec.transitions.items()
        )
        print(f"{name}: start {spec.start}; {edges}")
    return 0
