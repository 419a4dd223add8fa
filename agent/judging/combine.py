"""How the judge's verdicts and retrieval evidence are combined into the final context.

The default (`loop.combine = "relevant"`, measured in `benchmarks/pipeline.py`) follows
semi-supervised retrieval (Minnaar 2023): a trusted judge's *relevant set* is the
context, of whatever size it is, best evidence first, cut by the token budget
`loop.context_tokens` (`fit_budget`). When the plan has the conformal step, the
chunks of the pool that pass the calibrated cutoff are added to it (`union`) or not
(`relevant`). An untrusted judge decides nothing: the conformal set is the context
(or, in plans without the conformal step, the `fast` context). The fixed-size
rule below (`anchored`) is kept as an option.

Two sources of evidence disagree sometimes: the first-stage hybrid ranking
(strong at the top: on HotpotQA the fused top-5 holds both gold paragraphs
for ~60 % of questions) and the LLM judge (strong when the model is capable,
wrong in ways the trust checks of `ragsieve.agent.judging.rounds` cannot always see when it is
small). Neither is trusted alone.

Score-based decision (an untrusted judge, a failed batch)
    A chunk counts as relevant exactly when it is in the first-stage top
    `loop.final_k`, i.e. in the context the `fast` plan would use.

Combination rule (final context of `final_k` chunks), "anchored"
    0. The anchor: the first-stage top `loop.anchor_k` chunks stay, whatever
       the judge says. Retrieval's head is its most reliable evidence; a
       judge that passed every check but is wrong about a top-ranked chunk
       cannot push it out on its word alone. The anchor is capped at
       `final_k - 1`, so the judge always decides at least one slot (with a
       small `final_k` the agentic plan would otherwise be `fast` with extra
       calls; use the `fast` plan for that).
    1. Then the trusted-relevant chunks, in retrieval-evidence order
       (first-stage rank; chunks found by expansion after those, in discovery
       order; a neighbour right after the chunk that brought it). With
       `loop.admit_depth` > 0, a judged-relevant chunk is admitted only when
       retrieval agrees it is plausible: its evidence position is within
       that depth (a neighbour inherits its parent's position).
    2. Then the rest of the fast context (first-stage top `final_k`) in rank
       order, chunks without a trusted "irrelevant" verdict first.
    3. Then any other first-stage chunk without a trusted "irrelevant" verdict.
    The list is cut at `final_k`. So at most `final_k - anchor` chunks of
    the fast context can be displaced, each only by a trusted-relevant chunk
    (or, when nothing was judged relevant, by nothing: the fast context
    stays). With no trusted verdict at all the result IS the fast context
    (`final_k` = `retrieval.top_k`, both 5 by default), so both-gold recall
    equals `fast`'s by construction.

    `anchor_k = 0` and `admit_depth = 0` give the judge-first rule of the
    first release (measured worse than `fast` with the embedded 1.5B model;
    `benchmarks/combine_replay.py` compares the rules on recorded verdicts).
"""

from __future__ import annotations

from typing import Any

from ragsieve.tools.ingest.chunking import count_tokens


def score_based_relevant(ids: list[str], first_stage: list[str], final_k: int) -> list[str]:
    """The score-based decision: relevant iff in the first-stage top `final_k`."""
    top = set(first_stage[:final_k])
    return [cid for cid in ids if cid in top]


def evidence_keys(first_stage: list[str], discovered: list[str], neighbour_of: dict[str, str]) -> dict[str, float]:
    """Retrieval-evidence position of every known chunk (0-based; smaller is better)."""
    keys: dict[str, float] = {}
    for i, cid in enumerate(first_stage):
        keys.setdefault(cid, float(i))
    offset = float(len(first_stage))
    for i, cid in enumerate(discovered):
        if cid not in keys and cid not in neighbour_of:
            keys[cid] = offset + i
    for j, (cid, parent) in enumerate(neighbour_of.items()):
        if cid not in keys:
            keys[cid] = keys.get(parent, offset + len(discovered)) + 0.5 + j * 1e-6
    return keys


def select_context(
    first_stage: list[str],
    keys: dict[str, float],
    trusted: dict[str, bool],
    final_k: int,
    *,
    anchor_k: int = 0,
    admit_depth: int = 0,
) -> tuple[list[str], dict[str, Any]]:
    """The combination rule of the module docstring; returns chunk ids and a trace summary."""
    fast = first_stage[:final_k]
    anchor = fast[: max(0, min(anchor_k, final_k - 1))]
    positives = sorted((c for c, v in trusted.items() if v), key=lambda c: keys.get(c, float("inf")))
    refused = [c for c in positives if admit_depth > 0 and keys.get(c, float("inf")) >= admit_depth]
    admitted = [c for c in positives if c not in refused]
    ordered = (
        anchor
        + admitted
        + [c for c in fast if trusted.get(c) is not False]
        + [c for c in fast if trusted.get(c) is False]
        + [c for c in first_stage[final_k:] if trusted.get(c) is not False]
    )
    chosen: list[str] = []
    for cid in ordered:
        if cid not in chosen:
            chosen.append(cid)
        if len(chosen) == final_k:
            break
    summary = {
        "rule": {"anchor_k": anchor_k, "anchored": len(anchor), "admit_depth": admit_depth},
        "trusted_relevant": len(positives),
        "refused_too_deep": refused,
        "kept_from_fast": sum(1 for c in chosen if c in fast),
        "anchored_against_verdict": [c for c in anchor if trusted.get(c) is False],
        "promoted": [c for c in chosen if c not in fast],
        "displaced": [c for c in fast if c not in chosen],
        "same_as_fast": chosen == fast,
    }
    return chosen, summary


def relevant_set(keys: dict[str, float], trusted: dict[str, bool], relevant: list[str]) -> list[str]:
    """The relevant chunks, best retrieval evidence first: trusted verdicts and chunks added as relevant."""
    ids = list(dict.fromkeys([c for c, v in trusted.items() if v] + list(relevant)))
    return sorted(ids, key=lambda c: keys.get(c, float("inf")))


def fit_budget(hits: list, budget_tokens: int) -> tuple[list, list]:
    """(kept, dropped): hits in the given order while their texts fit `budget_tokens`;
    the first hit is always kept so a single long chunk still reaches the answer."""
    kept: list = []
    dropped: list = []
    used = 0
    for hit in hits:
        size = count_tokens(hit.chunk.text)
        if kept and used + size > budget_tokens:
            dropped.append(hit)
            continue
        kept.append(hit)
        used += size
    return kept, dropped
