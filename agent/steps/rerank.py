"""The `rerank` step: a cross-encoder (or a /rerank endpoint) re-scores the first-stage pool and keeps the best.

Retrieve-then-rerank (Nogueira & Cho, "Passage Re-ranking with BERT", 2019):
the pool's first `rerank.depth` hits (default: the whole `retrieval.pool`)
are scored as (question, passage) pairs by the configured provider
(`[rerank]`, `ragsieve.tools.rerankers`); the pool, the first-stage order and
the context (`rerank.keep`, default `retrieval.top_k`) then follow the new
order, so every later step (judge, conformal, answer) and `ragsieve eval`'s
first-stage metrics see the reranked list. The trace names the reranker that
ran and each hit's rank before and after. A plan holding this step (or the
fallback, with a reranker configured) is refused before any call when the
reranker cannot load: never a silent fallback to another order.
"""

from __future__ import annotations

from ragsieve.agent.config import Config
from ragsieve.agent.core.rerankers import reranker_for
from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import RerankedHit, RerankSummary


class Rerank(Step[Next]):
    name = "rerank"

    @classmethod
    def check_config(cls, config: Config) -> None:
        reranker_for(config)

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        cfg, retrieval = deps.config.rerank, deps.config.retrieval
        reranker = reranker_for(deps.config)
        depth = min(cfg.depth or len(state.candidates), len(state.candidates))
        scored, rest = state.candidates[:depth], state.candidates[depth:]
        result = reranker.run(state.question, scored)
        ranked = result.hits
        for hit in ranked:
            state.pool[hit.chunk_id] = hit
        keep = cfg.keep or retrieval.top_k
        state.candidates = ranked + rest
        moved = [h.chunk_id for h in ranked]
        state.first_stage = moved + [c for c in state.first_stage if c not in set(moved)]
        state.context = ranked[:keep]
        return StepResult(
            "next",
            RerankSummary(
                reranker=result.note,
                provider=result.method.value,
                scored=len(ranked),
                kept=keep,
                not_scored=len(rest),
                ranks=[
                    RerankedHit(
                        id=h.chunk_id,
                        before=int(h.extra.get("rank_before", 0)) or None,
                        after=h.rank,
                        score=round(h.extra.get("rerank_score", 0.0), 5),
                    )
                    for h in ranked
                ],
            ),
        )
