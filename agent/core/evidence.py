"""What several steps read from the run's evidence, shared here so that no step imports another.

The candidates a filter looks at (`candidate_hits`), the index's calibration, read once per file change
(`cached_calibration`), the context rule of `loop.combine` with `auto` resolved once per question
(`applied_rule`), and the chunks whose evidence is not similarity (`judged_evidence`).
"""

from __future__ import annotations

from pathlib import Path

from ragsieve.agent.calibration import calibration_path, load_calibration
from ragsieve.agent.calibration.store import Calibration
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps
from ragsieve.agent.judging.bounds import abstention_supported, barred_under, relevant_alone
from ragsieve.agent.judging.reliability import decide_rule
from ragsieve.agent.modes import ContextRule
from ragsieve.tools.types import Hit


def candidate_hits(state: RunState) -> list[Hit]:
    """Pool and context, each chunk once (pool first)."""
    seen: dict[str, Hit] = dict(state.pool)
    for hit in state.context:
        seen.setdefault(hit.chunk_id, hit)
    return list(seen.values())


def cached_calibration(deps: Deps) -> tuple[Calibration | None, list[str], Path | None]:
    """(calibration or None, warnings, path), re-read only when the file changes."""
    index = deps.index
    if index is None:
        return None, ["no index is open: no calibration can be found"], None
    root = index.root
    path = calibration_path(root)
    stamp = path.stat().st_mtime_ns if path.is_file() else None
    manifest = index.manifest or {}
    cal, warnings = deps.caches.calibration.get(
        (str(path), stamp),
        lambda: (
            load_calibration(root, manifest.get("corpus_fingerprint"), manifest.get("embedding"))
            if stamp is not None
            else (None, [])
        ),
    )
    return cal, warnings, path


def applied_rule(state: RunState, deps: Deps) -> ContextRule:
    """`loop.combine`, with `auto` resolved once per question from the judge's measured recall; under `auto` a
    judge measured to accept too many decoys is barred (`state.loop.barred`): it decides nothing."""
    if state.loop.rule is None:
        loop, retrieval = deps.config.loop, deps.config.retrieval
        cal = cached_calibration(deps)[0] if ContextRule(loop.combine) is ContextRule.AUTO else None
        model = str(deps.llm.chat.model_name or "") if deps.llm is not None else ""
        alpha = (
            deps.config.conformal.alpha if deps.config.conformal.alpha is not None else (cal.alpha if cal is not None else None)
        )
        reliability = cal.judges.get(model) if cal is not None else None
        coverage = None if alpha is None else 1 - alpha
        rule, with_fast, why = decide_rule(
            loop.combine,
            reliability,
            cal.ranks() if cal is not None else None,
            top_k=retrieval.top_k,
            pool=retrieval.pool,
            margin=loop.trust_margin,
            min_n=loop.trust_min_n,
            coverage=coverage,
        )
        barred, bar_why = barred_under(reliability, loop)
        if barred:  # the judge decides nothing: the statistical evidence is the context (union without verdicts)
            state.loop.barred = bar_why
            rule, why = ContextRule.UNION, f"auto: judge barred (it decides nothing: {bar_why}); without the bar: {why}"
        elif rule is ContextRule.RELEVANT and cal is not None:  # `auto` chose it (the calibration is read for auto only)
            alone, bound = relevant_alone(reliability, coverage, loop.trust_confidence)
            state.loop.rule_alone = alone and loop.relevant_alone
            if bound:
                why += (
                    f"; relevant set alone: {bound}"
                    if state.loop.rule_alone
                    else f"; conformal set kept: {bound}" + ("" if loop.relevant_alone else " (loop.relevant_alone = false)")
                )
        if not barred and cal is not None:  # issue 56: "nothing relevant" abstains only as far as recall supports it
            supported, recall_why = abstention_supported(reliability, coverage, loop.trust_confidence)
            if not supported:
                state.loop.abstain_blocked = recall_why
                why += f'; a "nothing relevant" does not abstain by itself: {recall_why}'
        state.loop.rule, state.loop.rule_reason, state.loop.rule_adds_fast = rule, why, with_fast
    return state.loop.rule


def judged_evidence(state: RunState) -> set[str]:
    """Chunk ids with evidence beyond similarity: trusted-relevant verdicts and the fallback's additions."""
    trusted = {} if state.loop.distrusted else state.loop.trusted
    added = set(state.fallback.added) if state.fallback else set()
    return {c for c, v in trusted.items() if v} | added
