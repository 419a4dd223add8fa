"""Conformal threshold on the context (CONFLARE-style split conformal retrieval).

Reads `calibration.json` from the index root (written by `ragsieve calibrate`). Every
candidate — the union of `state.pool` and `state.context` — gets its dense similarity
to the question (from the index vectors, as in calibration),
the top-1 similarity and its rank over the whole index, hence a nonconformity
score of the calibrated kind; a chunk passes when its score is <= q. With
`candidates = "context"` (default) the context is narrowed to the passing chunks; with
"pool" it becomes every passing pool chunk. At most `max_chunks` pass (best similarity
first) — the trace says when that budget binds.

Documented behaviour without a calibration file: pass-through, status "uncalibrated".
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ragsieve.agent.calibration import calibration_path, load_calibration
from ragsieve.agent.plan.runner import Deps, Step, StepResult, register
from ragsieve.agent.plan.state import ConformalRecord, RunState
from ragsieve.tools.filters.conformal import ScoreKind, nonconformity, ranks_of
from ragsieve.tools.types import Hit

log = logging.getLogger(__name__)

_THRESHOLD_TEXT = {
    ScoreKind.RAW: lambda q, top1: f"similarity >= {1 - q:.4f}",
    ScoreKind.GAP: lambda q, top1: f"similarity >= top1 - {q:.4f} = {top1 - q:.4f}",
    ScoreKind.RATIO: lambda q, top1: f"similarity >= top1 * {1 - q:.4f} = {top1 * (1 - q):.4f}",
    ScoreKind.RANK: lambda q, top1: f"rank <= {int(q)}",
}


def candidate_hits(state: RunState) -> list[Hit]:
    """Pool and context, each chunk once (pool first)."""
    seen: dict[str, Hit] = dict(state.pool)
    for hit in state.context:
        seen.setdefault(hit.chunk_id, hit)
    return list(seen.values())


def dense_similarities(state: RunState, deps: Deps, hits: list[Hit]) -> np.ndarray:
    """Each hit's dense cosine to the question, from the index vectors.

    Recomputed rather than read from `Hit.dense_score`: hits found by an expanded query
    carry the similarity to that expanded query, not to the question the calibration
    measured. Without vectors (a test double), `Hit.dense_score` is used.
    """
    vectors = getattr(deps.index, "vectors", None)
    if vectors is None:
        return np.array([math.nan if h.dense_score is None else float(h.dense_score) for h in hits], dtype=float)
    rows = [h.row for h in hits]
    return np.asarray(vectors[rows], dtype=float) @ query_vector(state, deps)


def corpus_view(state: RunState, deps: Deps, hits: list[Hit]) -> tuple[np.ndarray, float, np.ndarray]:
    """(similarities, top-1 similarity, 1-based ranks) of the hits against the whole index,
    as the calibration measured them; over the hits alone when the index has no vectors."""
    vectors = getattr(deps.index, "vectors", None)
    if vectors is None:
        sims = dense_similarities(state, deps, hits)
        return sims, float(sims.max()), ranks_of(sims)
    everything = np.asarray(vectors, dtype=float) @ query_vector(state, deps)
    sims = everything[[h.row for h in hits]]
    ordered = np.sort(everything)
    ranks = ordered.size - np.searchsorted(ordered, sims, side="right") + 1.0
    return sims, float(ordered[-1]), ranks


def query_vector(state: RunState, deps: Deps) -> np.ndarray:
    """The question's embedding (the index remembers recent queries, so this costs one embedding)."""
    return np.asarray(deps.index.embed_query(state.question), dtype=float)


def cached_calibration(deps: Deps):
    """(calibration or None, warnings, path), re-read only when the file changes."""
    root = getattr(deps.index, "root", None)
    if root is None:
        return None, ["the index has no root folder: no calibration can be found"], None
    path = calibration_path(root)
    stamp = path.stat().st_mtime_ns if path.is_file() else None
    cached = deps.extras.get("_calibration")
    if cached is not None and cached[0] == (str(path), stamp):
        return cached[1], cached[2], path
    fingerprint = (getattr(deps.index, "manifest", None) or {}).get("corpus_fingerprint")
    cal, warnings = load_calibration(root, fingerprint) if stamp is not None else (None, [])
    deps.extras["_calibration"] = ((str(path), stamp), cal, warnings)
    return cal, warnings, path


@register
class Conformal(Step):
    name = "conformal"

    def run(self, state: RunState, deps: Deps) -> StepResult:
        cfg = deps.config.conformal
        before = [h.chunk_id for h in state.context]
        if not cfg.enabled:
            return StepResult("next", {"status": "disabled", "kept": before, "removed": []})
        cal, warnings, path = cached_calibration(deps)
        if cal is None:
            return StepResult("next", {"status": "uncalibrated", "kept": before, "removed": [],
                                       "note": f"no calibration at {path}: context passed through unchanged "
                                               f"(run `ragsieve calibrate --index DIR`)", "warnings": warnings})
        kind = ScoreKind(cfg.score_kind) if cfg.score_kind else cal.kind
        alpha = cfg.alpha if cfg.alpha is not None else cal.alpha
        qhat = cal.threshold(kind, cfg.alpha)
        hits = candidate_hits(state)
        if not hits:
            return StepResult("next", {"status": "empty", "kept": [], "removed": [], "kind": kind.value})
        sims, top1, ranks = corpus_view(state, deps, hits)
        scores = nonconformity(kind, sims, top1, ranks)
        by_id = {h.chunk_id: (float(s), float(c)) for h, s, c in zip(hits, sims, scores)}
        source = state.context if cfg.candidates == "context" else sorted(hits, key=lambda h: -by_id[h.chunk_id][0])
        kept = [h for h in source if by_id[h.chunk_id][1] <= qhat]
        summary: dict = {"status": "applied", "kind": kind.value, "alpha": alpha, "coverage": round(1 - alpha, 4),
                         "qhat": None if math.isinf(qhat) else round(qhat, 6),
                         "threshold": "keep all" if math.isinf(qhat) else _THRESHOLD_TEXT[kind](qhat, top1),
                         "candidates": cfg.candidates, "pool_passing": int(np.sum(scores <= qhat)),
                         "scores": {h.chunk_id: round(by_id[h.chunk_id][1], 5) for h in state.context}}
        if not kept and cfg.min_keep and source:
            kept = sorted(source, key=lambda h: -by_id[h.chunk_id][0])[: cfg.min_keep]
            summary["min_keep_applied"] = f"no chunk passed the threshold; kept the best {len(kept)} (min_keep)"
        if len(kept) > cfg.max_chunks:
            best = {h.chunk_id for h in sorted(kept, key=lambda h: -by_id[h.chunk_id][0])[: cfg.max_chunks]}
            summary["budget_bound"] = (f"{len(kept)} chunks passed; the context budget max_chunks="
                                       f"{cfg.max_chunks} kept the best {cfg.max_chunks}")
            summary["over_budget"] = [h.chunk_id for h in kept if h.chunk_id not in best]
            kept = [h for h in kept if h.chunk_id in best]
        else:
            summary["budget_bound"] = False
        kept_ids = [h.chunk_id for h in kept]
        summary["kept"] = kept_ids
        summary["removed"] = [i for i in before if i not in set(kept_ids)]
        if warnings:
            summary["warnings"] = warnings
        state.context = kept
        state.conformal = ConformalRecord(kind=kind.value, alpha=alpha, qhat=summary["qhat"],
                                          calibration_n=cal.n_calibration, coverage=round(1 - alpha, 4))
        return StepResult("next", summary)
