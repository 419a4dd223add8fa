"""`ragsieve ask`: answer a question from an index, with citations."""

from __future__ import annotations

import argparse
import json
import re
import sys

from ragsieve.agent.answer.also_retrieved import STOPPED, UNCITED
from ragsieve.agent.answer.grounding import NOT_GROUNDED_NOTE, Grounding
from ragsieve.cli.common import add_common, add_llm_options, for_terminal, load_config, plural, range_checked
from ragsieve.cli.search import add_filters, reading_as

ABSTENTION_TEXT = {
    "no_evidence": "no passage passed the relevance evidence; the model was not asked",
    "passages": "the model abstained but the calibrated answerability score says answerable; the most relevant "
    "passages are shown instead",
    "mixed": "the answer both answers and says the context lacks the answer",
    "model": "the model found no answer in the passages (the closest ones are listed, not as an answer)",
    "ungrounded": "strict: the model's answer cited none of the passages, so the closest ones are listed instead",
}


EXIT_NO_ANSWER = 3  # the budget stopped the question before any answer (at most the closest passages shown)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ask", help="answer a question from an index, with citations")
    p.add_argument("question")
    add_common(p)
    add_llm_options(p)
    p.add_argument("--plan", help="plan name (fast, agentic, full, or one from the config)")
    p.add_argument("--json", action="store_true", help="print {answer, citations, trace, usage} as JSON")
    p.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="wall-clock limit for this question, every LLM call and retry included (default: budget.deadline_s)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="full plan: plot the GMM outlier filter's view of the context")
    add_filters(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.search.where import Where

    where = reading_as(Where.parse(args.where), args.reading_as)
    config = load_config(args)
    budget = range_checked(config.budget, deadline_s=args.deadline)
    config = config.model_copy(update={"budget": budget})
    if args.plot:
        config = config.model_copy(update={"outliers": config.outliers.model_copy(update={"plot": args.plot})})
    with Orchestrator.open(args.index, config) as orch:
        answer = orch.ask(args.question, plan=args.plan, where=where)
    # the budget stopped it before any answer: no text, or only the closest passages (not an answer)
    unanswered = bool(answer.stopped) and (not answer.answer.strip() or answer.answer.startswith(STOPPED))
    if args.json:  # JSON escapes C0 controls itself; C1 controls (e.g. \x9b, a one-byte CSI) are escaped here
        text = json.dumps(answer.public(), indent=2, ensure_ascii=False, default=str)
        print(re.sub("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]", lambda m: f"\\u{ord(m.group()):04x}", text))
        return EXIT_NO_ANSWER if unanswered else 0
    if unanswered:
        if answer.answer.strip():  # the closest passages, marked as not an answer
            print(for_terminal(answer.answer))
        print(
            for_terminal(
                f"error: no answer: the question was stopped before any answer ({answer.stopped}); raise --deadline or the budget"
            ),
            file=sys.stderr,
        )
        return EXIT_NO_ANSWER
    print(for_terminal(answer.answer))
    if answer.grounding == Grounding.NONE:
        print(f"\n({NOT_GROUNDED_NOTE})")
    if answer.stopped:
        print(for_terminal(f"\n(stopped early: {answer.stopped})"), file=sys.stderr)
    if answer.citations:
        print("\nSources:")
        for c in answer.citations:
            print(
                for_terminal(
                    f"  [{c.number}] {c.label()}"
                    + (f"  ({c.title})" if c.title else "")
                    + (
                        f"  [{UNCITED}]"
                        if not c.cited
                        else "  [suggested: not cited by the model]"
                        if c.origin == "inferred"
                        else ""
                    )
                )
            )
    if answer.coverage is not None:
        print(f"\n(context calibrated for coverage {answer.coverage})")
    if answer.abstention:
        print(f"(abstention: {ABSTENTION_TEXT.get(answer.abstention, answer.abstention)})")
    if answer.resolved is not None:
        print(f"(validated: {'resolved' if answer.resolved else 'not resolved'})")
    for note in answer.notes:
        print(f"(note: {note})")
    u = answer.usage
    print(
        f"\n(plan {answer.plan}: {plural(u.calls, 'LLM call')}, {u.prompt_tokens}+{u.completion_tokens} tokens, "
        f"{u.latency_s:.1f}s in the model)",
        file=sys.stderr,
    )
    return 0
