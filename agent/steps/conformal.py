"""Conformal threshold retrieval (CONFLARE, split conformal retrieval).

Reads `calibration.json` from the index root (written by `ragsieve calibrate`). Every
chunk of the pool (and the context) gets the calibrated kind's signal - its dense
similarity to the question, or the hybrid (dense + BM25 RRF) signal - with the top-1 value
and its rank over the whole index, as in calibration (`conformal_signal`), hence a
nonconformity score; a chunk passes when its score is <= q. With `candidates = "pool"`
(default) the *conformal set* is every passing pool chunk, of whatever size; `corpus` also
admits passing chunks beyond the pool (the best `corpus_max` of the whole index by that
signal): CONFLARE's threshold retrieval, where the
1 - alpha coverage is guaranteed (the pool caps coverage at the pool's own recall). It is then
combined with the judge's relevant set (`loop.combine`, `combine_with_judge`) and cut
by the token budget `loop.context_tokens`. When nothing passes and nothing was judged
relevant, the context is empty and the answer step says there is no evidence, without
asking the model (`min_keep` > 0 keeps the best chunks instead).

Without a calibration file the context passes through and a note says the index is
uncalibrated (shown by `ragsieve ask`).
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

from ragsieve.agent.core.conformal_signal import corpus_candidates, corpus_view
from ragsieve.agent.core.evidence import applied_rule, cached_calibration, candidate_hits
from ragsieve.agent.core.state import ConformalRecord, CoverageLoss, Evidence, RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import ConformalSummary
from ragsieve.agent.judging.combine import evidence_keys, fit_budget, relevant_set
from ragsieve.agent.modes import ContextRule
from ragsieve.tools.filters.conformal import ScoreKind, nonconformity
from ragsieve.tools.types import Hit

log = logging.getLogger(__name__)

_THRESHOLD_TEXT = {
    ScoreKind.RAW: lambda q, top1: f"similarity >= {1 - q:.4f}",
    ScoreKind.GAP: lambda q, top1: f"similarity >= top1 - {q:.4f} = {top1 - q:.4f}",
    ScoreKind.RATIO: lambda q, top1: f"similarity >= top1 * {1 - q:.4f} = {top1 * (1 - q):.4f}",
    ScoreKind.RANK: lambda q, top1: f"rank <= {int(q)}",
    ScoreKind.HYBRID_RANK: lambda q, top1: f"hybrid rank <= {int(q)}",
    ScoreKind.HYBRID_RATIO: lambda q, top1: f"hybrid RRF >= top1 * {1 - q:.4f} = {top1 * (1 - q):.6f}",
}


class Conformal(Step[Next]):
    name = "conformal"

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        cfg = deps.config.conformal
        before = [h.chunk_id for h in state.context]
        if not cfg.enabled:
            return StepResult("next", ConformalSummary(status="disabled", kept=before, removed=[]))
        cal, warnings, path = cached_calibration(deps)
        if cal is None:
            note = (
                f"uncalibrated index: the conformal threshold was not applied (no {path}); "
                f"run `ragsieve calibrate --index DIR` to keep every chunk passing a calibrated cutoff"
            )
            if note not in state.notes:
                state.notes.append(note)
            return StepResult(
                "next", ConformalSummary(status="uncalibrated", kept=before, removed=[], note=note, warnings=warnings)
            )
        kind = ScoreKind(cfg.score_kind) if cfg.score_kind else cal.kind
        alpha = cfg.alpha if cfg.alpha is not None else cal.alpha
        qhat = cal.threshold(kind, cfg.alpha)
        hits = candidate_hits(state)
        beyond: Hit | None = None
        if cfg.candidates == "corpus":  # CONFLARE's threshold retrieval: passing chunks beyond the pool too
            extra = corpus_candidates(state, deps, cfg.corpus_max, {h.chunk_id for h in hits}, kind, cal.hybrid_k)
            state.remember(extra.hits)
            hits += extra.hits
            beyond = extra.beyond
        if not hits:
            return StepResult("next", ConformalSummary(status="empty", kept=[], removed=[], kind=kind.value))
        sims, top1, ranks = corpus_view(state, deps, hits + ([beyond] if beyond else []), kind, cal.hybrid_k)
        scores = nonconformity(kind, sims, top1, ranks)
        cap_bound = beyond is not None and float(scores[-1]) <= qhat  # a passing chunk lay past corpus_max
        if beyond is not None:
            sims, ranks, scores = sims[:-1], ranks[:-1], scores[:-1]
        by_id = {h.chunk_id: (float(s), float(c)) for h, s, c in zip(hits, sims, scores)}
        source = state.context if cfg.candidates == "context" else sorted(hits, key=lambda h: -by_id[h.chunk_id][0])
        passing = [h for h in source if by_id[h.chunk_id][1] <= qhat]
        summary = ConformalSummary(
            status="applied",
            kind=kind.value,
            alpha=alpha,
            coverage=round(1 - alpha, 4),
            qhat=None if math.isinf(qhat) else round(qhat, 6),
            threshold="keep all" if math.isinf(qhat) else _THRESHOLD_TEXT[kind](qhat, top1),
            candidates=cfg.candidates,
            passing=[h.chunk_id for h in passing],
            best=_best(scores),  # the lowest nonconformity score: it passes when <= qhat
        )
        combined = combine_with_judge(state, deps, passing)
        kept, promised = combined.kept, combined.promised
        summary.combined_with = combined.how
        reduced: list[CoverageLoss] = []
        # the guarantee is about every passing chunk of the index: say the cap cut the set (unless the relevant
        # set stands alone, when the coverage rests on the judge's recall bound, not on the set)
        if cap_bound and not combined.alone:
            reduced.append(CoverageLoss.CORPUS_CAP)
            note = (
                f"more chunks passed the conformal cutoff than conformal.corpus_max = {cfg.corpus_max} admits: "
                f"the conformal set was truncated, so coverage {1 - alpha:.2f} is not guaranteed for this "
                f"answer; raise conformal.corpus_max or alpha"
            )
            summary.corpus_cap = {"limit": cfg.corpus_max, "bound": True, "note": note}
            if note not in state.notes:
                state.notes.append(note)
        summary.promised = promised
        summary.rule = state.loop.rule_reason
        if not kept and cfg.min_keep and source:
            kept = sorted(source, key=lambda h: -by_id[h.chunk_id][0])[: cfg.min_keep]
            summary.min_keep_applied = f"no chunk passed the threshold; kept the best {len(kept)} (min_keep)"
        kept, dropped = fit_budget(kept, deps.config.context_budget()) if kept else ([], [])
        summary.over_budget = [h.chunk_id for h in dropped]
        passing_ids = set(summary.passing)
        cut = [h.chunk_id for h in dropped if h.chunk_id in passing_ids]
        if cut:  # the guarantee is about the whole passing set: say when the budget cut into it
            reduced.append(CoverageLoss.BUDGET)
            note = (
                f"the conformal set ({len(passing)} chunks) exceeded loop.context_tokens = "
                f"{deps.config.context_budget()}: {len(cut)} passing chunks were left out, so coverage "
                f"{1 - alpha:.2f} is not guaranteed for this answer; raise the budget or alpha"
            )
            summary.budget_note = note
            if note not in state.notes:
                state.notes.append(note)
        kept_ids = [h.chunk_id for h in kept]
        summary.kept = kept_ids
        summary.removed = [i for i in before if i not in set(kept_ids)]
        if warnings:
            summary.warnings = warnings
        state.context = kept
        state.evidence = (
            Evidence.NONE
            if not kept
            else (Evidence.STRONG if passing else (Evidence.JUDGED if state.loop.judge_trusted else Evidence.FAST))
        )
        state.conformal = ConformalRecord(
            kind=kind.value,
            alpha=alpha,
            qhat=summary.qhat,
            calibration_n=cal.n_calibration,
            coverage=round(1 - alpha, 4),
            passing=[h.chunk_id for h in passing],
            promised=promised,
            reduced=reduced,
            corpus_cap=cfg.corpus_max if cap_bound and not combined.alone else None,
            basis="judge recall bound" if combined.alone else "conformal set",
        )
        summary.coverage_guaranteed = not reduced
        summary.coverage_basis = state.conformal.basis
        return StepResult("next", summary)


class Combined(NamedTuple):
    """The context `combine_with_judge` made: the chunks, how, the fast-context chunks it joined (a promise later
    stages keep), and whether the relevant set stands alone (coverage resting on the judge's recall bound)."""

    kept: list[Hit]
    how: str
    promised: list[str]
    alone: bool = False


def combine_with_judge(state: RunState, deps: Deps, passing: list[Hit]) -> Combined:
    """The conformal set combined with the judge's evidence (`loop.combine`), best evidence first.

    Every rule keeps the conformal set (`anchored` keeps the part of it the context held): a trusted
    judge narrows only what lies beyond it, so the coverage 1 - alpha holds whatever the judge's recall;
    except under `auto` when the judge's measured recall, bounded below, reaches 1 - alpha
    (`bounds.relevant_alone`), when its relevant set stands alone.
    Chunks the sparse fallback added are kept whatever their similarity: they were found
    because similarity misses them (COS-Mix)."""
    rule = applied_rule(state, deps)
    added = [state.pool[c] for c in (state.fallback.added if state.fallback else []) if c in state.pool]
    if rule is ContextRule.ANCHORED:
        narrowed = {h.chunk_id for h in passing}
        return Combined(_unique([h for h in state.context if h.chunk_id in narrowed] + added), "anchored: context narrowed", [])
    fast_context = [state.pool[c] for c in state.first_stage[: deps.config.retrieval.top_k] if c in state.pool]
    if not state.loop.judge_trusted:
        # the context before this step is the fast context (no trusted verdict narrowed it): the conformal
        # set joins it, never replaces it, so the step cannot lose what the stage before it held (measured:
        # the conformal set alone, a median of 2 chunks on SQuAD at alpha 0.1, lost gold the fast context held, issue 23)
        return Combined(
            _unique(fast_context + passing + added),
            "conformal set + fast context (no trusted judge)",
            [h.chunk_id for h in fast_context],
        )
    fast = fast_context if state.loop.rule_adds_fast else []
    plus = " + fast context" if fast else ""
    keys = evidence_keys(state.first_stage, state.loop.discovered, state.loop.neighbour_of)
    judged = [state.pool[c] for c in relevant_set(keys, state.loop.trusted, []) if c in state.pool]
    if rule is ContextRule.RELEVANT and state.loop.rule_alone:
        # auto measured the judge: its recall, bounded below, reaches 1 - alpha (bounds.relevant_alone)
        return Combined(_unique(judged + added), "relevant set alone (judge recall bound >= coverage)", [], alone=True)
    if rule is ContextRule.RELEVANT:
        # the relevant set replaces the fast context, never the conformal set: the rule is chosen from judge
        # recall measured on 30-60 questions, a point estimate (HotpotQA, flip10: 0.846 on a fold at alpha 0.1)
        return Combined(_unique(judged + passing + added), "relevant set + conformal set", [])
    return Combined(_unique(judged + fast + passing + added), f"relevant set + conformal set{plus}", [h.chunk_id for h in fast])


def _unique(hits: list[Hit]) -> list[Hit]:
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.chunk_id, hit)
    return list(seen.values())


def _best(scores: Any) -> float | None:
    """The best (lowest) finite nonconformity score of the candidates, or None."""
    finite = [float(s) for s in scores if math.isfinite(float(s))]
    return round(min(finite), 6) if finite else None
