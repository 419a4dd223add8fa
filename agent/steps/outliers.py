"""GMM outlier removal on the context (Bulgakov 2024, `ragsieve.tools.filters.gmm`).

The mixture is fitted on the question's pool (the paper filters 20 retrieved
documents): the context plus the best pool chunks by dense similarity up to
`fit_candidates` (20), and only context chunks are removed. A chunk is an outlier
when flagged in at least `min_outlier_freq` = 4 of the K x PCA runs (3 x 2 by
default): the paper's better setting, and the conservative one, since a gold chunk
wrongly removed costs more than a distractor kept. Chunks a trusted judge called relevant, or
the sparse fallback added, are never removed: their evidence is not the similarity
geometry the mixture models; nor are the conformal set's members (removing one would break the
coverage 1 - alpha the conformal step states). What the filter may remove is the rest: the fast
context's chunks outside the conformal set (the paper's setting: top-k retrieval). If every context
chunk is flagged, the context is left unchanged and the trace says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsieve.agent.config import Config, OutlierConfig
from ragsieve.agent.core.conformal_signal import dense_similarities, query_vector
from ragsieve.agent.core.evidence import candidate_hits, judged_evidence
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import OutliersSummary
from ragsieve.tools.filters.gmm import GMMOutlierFilter, plot_outliers
from ragsieve.tools.index.backend import vectors_of


def build_filter(cfg: OutlierConfig) -> GMMOutlierFilter:
    return GMMOutlierFilter(
        method=cfg.method,
        alpha=cfg.alpha,
        pca_dims=cfg.pca_dims,
        n_components=cfg.n_components,
        percentile=cfg.percentile,
        min_outlier_freq=cfg.min_outlier_freq,
        degree=cfg.degree,
        seed=cfg.seed,
        protect_top=cfg.protect_top,
        standardize=cfg.standardize,
    )


class Outliers(Step[Next]):
    name = "outliers"

    @classmethod
    def check_config(cls, config: Config) -> None:
        build_filter(config.outliers)  # the filter checks its settings in __init__ (also when disabled: refused, not ignored)

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        cfg = deps.config.outliers
        before = [h.chunk_id for h in state.context]
        if not cfg.enabled:
            return StepResult("next", OutliersSummary(status="disabled", kept=before, removed=[]))
        if not state.context:
            return StepResult("next", OutliersSummary(status="empty", kept=[], removed=[]))
        flt = build_filter(cfg)
        hits = candidate_hits(state)
        sims = dense_similarities(state, deps, hits)
        order = np.argsort(-sims, kind="stable")
        context_ids = set(before)
        chosen = [hits[i] for i in order if hits[i].chunk_id in context_ids]
        for i in order:
            if len(chosen) >= max(cfg.fit_candidates, len(before)):
                break
            if hits[i].chunk_id not in context_ids:
                chosen.append(hits[i])
        sim_of = {h.chunk_id: float(s) for h, s in zip(hits, sims)}
        chosen.sort(key=lambda h: -sim_of[h.chunk_id])
        vectors = np.asarray(vectors_of(deps.need_index())[[h.row for h in chosen]], dtype=float)
        qvec = query_vector(state, deps)
        result = flt.run(vectors, qvec)
        flagged = {h.chunk_id for h, out in zip(chosen, result.outliers) if out}
        counts = {h.chunk_id: c for h, c in zip(chosen, result.counts)}
        kept_by_judge = judged_evidence(state)
        members = set(state.conformal.passing) if state.conformal is not None else set()
        removed = [i for i in before if i in flagged and i not in kept_by_judge | members]
        optional: dict[str, Any] = {"notes": result.notes} if result.notes else {}
        if removed and len(removed) == len(before):
            optional["note"] = "every context chunk was flagged: context left unchanged"
            removed = []
        state.context = [h for h in state.context if h.chunk_id not in set(removed)]
        if cfg.plot:
            path = plot_outliers(
                vectors, qvec, result.outliers, cfg.plot, flt=flt, labels=[h.chunk_id for h in chosen], title=state.question[:80]
            )
            optional["plot"] = str(path)
        summary = OutliersSummary(
            status="applied",
            method=flt.method.value,
            fit_size=len(chosen),
            runs_completed=result.completed_runs,
            runs=[r.as_dict() for r in result.runs],
            min_outlier_freq=flt.min_outlier_freq,
            percentile=flt.percentile,
            flag_counts={i: counts[i] for i in before},
            pool_outliers=sorted(flagged - context_ids),
            kept_by_judge=sorted(flagged & context_ids & kept_by_judge),
            kept_by_conformal=sorted((flagged & context_ids & members) - kept_by_judge),
            kept=[h.chunk_id for h in state.context],
            removed=removed,
            **optional,
        )
        return StepResult("next", summary)


# END
