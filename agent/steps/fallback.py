"""The sparse-chunk fallback (COS-Mix, arXiv 2406.00638) after an unresolved draft."""

from __future__ import annotations

from typing import Literal, TypedDict

import numpy as np

from ragsieve.agent.config import Config
from ragsieve.agent.core.rerankers import fallback_reranker, reranker_for
from ragsieve.agent.core.state import FallbackRecord, JudgeMode, RunState
from ragsieve.agent.core.step import Deps, Step, StepResult, Target
from ragsieve.agent.judging.checks import pick_decoys
from ragsieve.agent.judging.rounds import budget_reason, judge_candidates
from ragsieve.tools.index.sparse.subset import cosmix_scores
from ragsieve.tools.types import Hit

# `unchanged`: nothing was added, so the context, and at temperature 0 the answer and its validation, would be
# the same again: the plans end there with the answer they have (issue 56) instead of re-running the filters
Added = Literal["next", "unchanged"]


class AddedEdges(TypedDict):
    next: Target
    unchanged: Target


class Fallback(Step[Added, AddedEdges]):
    """Searches only the index's sparse subset, reranks, judges, and adds relevant chunks to the context.

    Retrieval over S = `deps.index.sparse_rows` (chunks already in the context
    left out), `fallback.sparse_candidates` of them by the COS-Mix score
    cos(q, c) + w * (1 - nearest-neighbour cosine of c)
    (`ragsieve.tools.index.sparse.subset.cosmix_scores`, w = `fallback.distance_weight`);
    an index without vectors (a test double) uses the hybrid retriever on S. Reranking
    (`ragsieve.agent.core.rerankers.fallback_reranker`): `deps.caches.reranker`, else the configured
    `[rerank]` provider (the one the `rerank` step uses; it must load or the plan is refused), else FlashRank
    from `FallbackConfig` when cached, else the embedding order — and the trace says which ran. Judging: `ragsieve.agent.judging.rounds` as in the loop (one round, with
    decoys unless the loop's judge is trusted for the question, which passed them; all-false is accepted here;
    a judge distrusted earlier is not asked). Added: up to `fallback.max_added`
    chunks, appended after the loop's selection:
    - a judge trusted for this question (it passed its checks in the loop and in this round): only the
      candidates it calls relevant, in rerank order, or none (a trusted "nothing relevant" stays an
      abstention); when it could not be asked (budget spent, every batch failed), none;
    - a judge not trusted for this question (distrusted in the loop, or caught by this round's checks): none.
      A judge caught by its checks decides nothing for the question, and no chunk joins that nobody vouched
      for: unjudged sparse chunks are near-miss text as often as answers (issue 46: they raised no answer in
      `benchmarks/results/fallback.json` and made `full` answer unanswerable questions `fast` abstained on);
    - no verdict to be had (every batch failed here, and no judge was trusted or caught before, e.g. a plan
      without a judge step whose model errs on the fallback's round): the top reranked ones, unjudged
      (`score_based`), as COS-Mix adds them; the later filters keep them.
    """

    name = "fallback"

    @classmethod
    def check_config(cls, config: Config) -> None:
        if config.rerank.provider is not None:  # a configured reranker must load (before any call)
            reranker_for(config)

    def run(self, state: RunState, deps: Deps) -> StepResult[Added]:
        cfg = deps.config
        state.fallback_used = True
        rows = list(deps.need_index().sparse_rows)
        if not rows:
            return StepResult("unchanged", {"added": [], "reason": "the index has no sparse chunks"})
        in_context = {h.chunk_id for h in state.context}
        hits, scoring = sparse_candidates(state, deps, rows, in_context)
        if not hits:
            return StepResult("unchanged", {"sparse_rows": len(rows), "added": [], "reason": "no sparse candidates"})
        reranker = fallback_reranker(cfg, deps.caches)  # the configured [rerank] provider, else lenient FlashRank
        reranked = reranker.run(state.question, hits)
        ordered = reranked.hits
        state.remember(ordered)
        summary = {
            "sparse_rows": len(rows),
            "scoring": scoring,
            "candidates": [h.chunk_id for h in ordered],
            "rerank": reranked.method.value,
            "rerank_note": reranked.note,
        }

        known = {h.chunk_id: state.judged[h.chunk_id] for h in ordered if h.chunk_id in state.judged}
        todo = [h for h in ordered if h.chunk_id not in known]
        spent = budget_reason(deps.need_llm().meter.snapshot(), cfg.loop)
        verdicts: dict[str, bool] = dict(known)
        distrusted = state.loop.distrusted
        trusted_before = state.loop.judge_trusted  # the loop's judge gave trusted verdicts and was not caught
        if todo and distrusted:
            mode, reason = JudgeMode.SKIPPED, f"not judged: the judge is not trusted for this question ({distrusted})"
        elif todo and spent:
            mode, reason = JudgeMode.SKIPPED, f"not judged: {spent}"
        elif todo:  # controls once per question (issue 56): a judge trusted for it passed them in its first round
            shown = 0 if trusted_before else cfg.loop.judge_decoys
            decoys = pick_decoys(deps.index, state.question, {h.chunk_id for h in todo}, shown, admit=deps.admitted)
            result = judge_candidates(
                state.question,
                todo,
                llm=deps.llm,
                prompts=deps.prompts,
                loop=cfg.loop,
                ranked_ids=[h.chunk_id for h in todo],
                first_round=False,
                decoys=decoys,
                seed="fallback",
            )
            mode, reason = result.mode, result.reason
            summary["batches"] = [b.public() for b in result.batches]
            verdicts.update(result.trusted)
            summary["decoys_relevant"] = f"{result.decoys_relevant} of {result.decoys}"
            if mode is JudgeMode.SCORE:
                state.loop.distrusted = f"fallback: {reason}"
            for cid, value in result.verdicts.items():
                state.judged[cid] = value if mode is JudgeMode.JUDGE else state.judged.get(cid, False)
        else:
            mode, reason = JudgeMode.JUDGE, "every candidate was judged before"
        if mode is JudgeMode.JUDGE:
            added = [h for h in ordered if verdicts.get(h.chunk_id)]
        elif state.loop.distrusted:  # caught in the loop or in this round: it decides nothing, nothing unvouched joins
            added = []
            reason = f"{reason}; a judge not trusted for this question adds nothing, and no chunk joins unjudged"
        elif trusted_before:  # budget spent or every batch failed: nothing unjudged
            added = []
            reason = f"{reason}; a judge trusted for this question adds only chunks it accepts: none added"
        else:  # no verdict to be had (every batch failed, no judge trusted before): reranked order (COS-Mix)
            added = list(ordered)
            summary["score_based"] = True
        added = added[: cfg.fallback.max_added]
        state.context = state.context + added
        for hit in added:
            if hit.chunk_id not in state.relevant:
                state.relevant.append(hit.chunk_id)
        summary.update(
            {"judge_mode": mode, "judge_reason": reason, "added": [h.chunk_id for h in added], "context_size": len(state.context)}
        )
        state.fallback = FallbackRecord.model_validate(summary, strict=False)
        return StepResult("next" if added else "unchanged", summary)


def sparse_candidates(state: RunState, deps: Deps, rows: list[int], exclude: set[str]) -> tuple[list[Hit], str]:
    """The best sparse chunks for the question by our distance score (`cosmix_scores`: ours, not COS-Mix's)."""
    cfg = deps.config.fallback
    index = deps.need_index()
    vectors = index.vectors
    if vectors is None:
        hits = deps.need_retriever().run(state.question, top_k=cfg.sparse_candidates + len(exclude), rows=rows)
        return [h for h in hits if h.chunk_id not in exclude][: cfg.sparse_candidates], "hybrid retriever on S"
    all_nn = deps.caches.sparse_nn.get(tuple(rows), lambda: _nn_of_rows(np.asarray(vectors, dtype=np.float32), rows))
    admitted = set(deps.admitted(rows))  # a metadata filter on the question narrows S too
    keep = [i for i, r in enumerate(rows) if r in admitted]
    nn, rows = all_nn[keep], [rows[i] for i in keep]
    if not rows:
        return [], "no sparse chunk passes the question's filter"
    qvec = np.asarray(index.embed_query(state.question), dtype=np.float32)
    sims = np.asarray(vectors[rows], dtype=np.float32) @ qvec
    scores = cosmix_scores(sims, nn, cfg.distance_weight)
    order = np.argsort(-scores, kind="stable")
    picked: list[Hit] = []
    for i in order:
        row = rows[int(i)]
        chunk = index.store.get_many([row])[0]
        if chunk.chunk_id in exclude:
            continue
        picked.append(
            Hit(
                chunk=chunk,
                row=row,
                score=float(scores[i]),
                dense_score=float(sims[i]),
                extra={"neighbour_similarity": float(nn[i])},
            )
        )
        if len(picked) >= cfg.sparse_candidates:
            break
    return picked, f"cos(q,c) + {cfg.distance_weight} * (1 - nearest-neighbour cos)"


def _nn_of_rows(vectors: np.ndarray, rows: list[int]) -> np.ndarray:
    """Nearest-other-chunk similarity of `rows` (blockwise, exact)."""
    out = np.full(len(rows), -1.0, dtype=np.float32)
    if len(vectors) < 2:
        return out
    for start in range(0, len(rows), 512):
        block = rows[start : start + 512]
        sims = vectors[block] @ vectors.T
        sims[np.arange(len(block)), block] = -np.inf
        out[start : start + len(block)] = sims.max(axis=1)
    return out
