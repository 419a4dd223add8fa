"""First-stage hybrid retrieval (BM25 + dense, fused)."""
from __future__ import annotations

from ragsieve.agent.plan.runner import Deps, Step, StepResult, register
from ragsieve.agent.plan.state import RunState


@register
class Retrieve(Step):
    """Fills `first_stage` (ranked ids, for metrics), `candidates` (for judging) and `context` (for answering)."""

    name = "retrieve"

    def run(self, state: RunState, deps: Deps) -> StepResult:
        cfg = deps.config
        depth = max(cfg.retrieval.candidate_k, cfg.retrieval.top_k, cfg.loop.candidates)
        hits = deps.retriever.run(state.question, top_k=depth)
        state.remember(hits)
        state.first_stage = [h.chunk_id for h in hits]
        state.candidates = hits[: cfg.loop.candidates]
        state.context = hits[: cfg.retrieval.top_k]
        return StepResult("next", {
            "retrieved": len(hits),
            "top": [{"id": h.chunk_id, "score": round(h.score, 5), "bm25_rank": h.bm25_rank,
                     "dense_rank": h.dense_rank} for h in hits[: cfg.retrieval.top_k]],
        })
