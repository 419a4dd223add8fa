"""First-stage hybrid retrieval (BM25 + dense, fused) and the question's candidate pool."""

from __future__ import annotations

from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import RankedHit, RetrieveSummary


def rest_rows(deps: Deps) -> list[int] | None:
    """COS-Mix's R: every row outside the sparse subset S (None: search everything)."""
    index = deps.need_index()
    sparse = set(index.sparse_rows)
    if not sparse:
        return None
    n = len(index)
    return deps.caches.rest_rows.get(n, lambda: [r for r in range(n) if r not in sparse])


class Retrieve(Step[Next]):
    """Fills `first_stage` (ranked ids: metrics, evidence order), the pool (`retrieval.pool`
    best hits, what every later stage works from; `candidates` = the pool, for judging)
    and `context` (the `fast` context: the first `retrieval.top_k`). With
    `retrieval.exclude_sparse`, the first stage searches R only (COS-Mix)."""

    name = "retrieve"

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        cfg = deps.config.retrieval
        depth = max(cfg.candidate_k, cfg.top_k, cfg.pool)
        rows = rest_rows(deps) if cfg.exclude_sparse else None
        hits = (
            deps.need_retriever().run(state.question, top_k=depth, rows=rows)
            if rows is not None
            else deps.need_retriever().run(state.question, top_k=depth)
        )
        pool = hits[: cfg.pool]
        state.remember(pool)
        state.first_stage = [h.chunk_id for h in hits]
        state.candidates = list(pool)
        state.context = hits[: cfg.top_k]
        embedded = {"embedded": deps.index.embedding_placement()} if deps.index is not None else {}
        return StepResult(
            "next",
            RetrieveSummary(
                **embedded,
                retrieved=len(hits),
                pool=len(pool),
                searched="R (non-sparse)" if rows is not None else "all",
                top=[
                    RankedHit(id=h.chunk_id, score=round(h.score, 5), bm25_rank=h.bm25_rank, dense_rank=h.dense_rank)
                    for h in hits[: cfg.top_k]
                ],
            ),
        )
