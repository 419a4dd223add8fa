"""What the conformal step scores a chunk by: its dense similarity or the hybrid signal, over the corpus.

Calibration (`ragsieve.agent.calibration`) measured each question's answer-bearing chunk
against the *whole index*: its dense cosine to the question, the top-1 cosine and its rank,
and the hybrid signal (RRF of its dense and BM25 ranks, `tools.filters.conformal.hybrid_signal`)
with its top-1 and rank. Inference must score candidates the same way, so these helpers
compute the same quantities for the step's candidates. Without index vectors (a test double)
they fall back to the candidates alone, from the hits' own scores.
"""
from __future__ import annotations

import math

import numpy as np

from ragsieve.agent.plan.runner import Deps
from ragsieve.agent.plan.state import RunState
from ragsieve.tools.filters.conformal import HYBRID_RRF_K, ScoreKind, hybrid_signal, ranks_of
from ragsieve.tools.index.dense import corpus_similarities
from ragsieve.tools.types import Hit


def query_vector(state: RunState, deps: Deps) -> np.ndarray:
    """The question's embedding (the index remembers recent queries, so this costs one embedding)."""
    return np.asarray(deps.index.embed_query(state.question), dtype=float)


def dense_similarities(state: RunState, deps: Deps, hits: list[Hit]) -> np.ndarray:
    """Each hit's dense cosine to the question, from the index vectors.

    Recomputed rather than read from `Hit.dense_score`: hits found by an expanded query
    carry the similarity to that expanded query, not to the question the calibration
    measured. Without vectors (a test double), `Hit.dense_score` is used.
    """
    if getattr(deps.index, "vectors", None) is None:
        return np.array([math.nan if h.dense_score is None else float(h.dense_score) for h in hits], dtype=float)
    return row_similarities(state, deps, [h.row for h in hits])


def row_similarities(state: RunState, deps: Deps, rows: list[int]) -> np.ndarray:
    """The dense cosine of each of `rows` (index vectors) to the question."""
    if not rows:
        return np.zeros(0)
    return np.asarray(deps.index.vectors[rows], dtype=float) @ query_vector(state, deps)


def corpus_signal(state: RunState, deps: Deps, kind: ScoreKind, hybrid_k: int | None) -> np.ndarray | None:
    """The kind's signal for every index row (None without index vectors, or without whole-corpus
    BM25 scores for a hybrid kind)."""
    vectors = getattr(deps.index, "vectors", None)
    if vectors is None:
        return None
    key = (id(deps.index), state.question, kind.hybrid, hybrid_k, len(vectors))
    memo = deps.extras.get("_corpus_signal")  # the step asks twice per question (candidates, then view)
    if memo is not None and memo[0] == key:
        return memo[1]
    scores = getattr(getattr(deps.index, "bm25", None), "scores", None)
    if kind.hybrid and scores is None:
        return None
    signal = corpus_similarities(vectors, query_vector(state, deps))
    if kind.hybrid:
        signal = hybrid_signal(signal, scores(state.question), hybrid_k or HYBRID_RRF_K)
    deps.extras["_corpus_signal"] = (key, signal)
    return signal


def hits_signal(state: RunState, deps: Deps, hits: list[Hit], kind: ScoreKind, hybrid_k: int | None) -> np.ndarray:
    """The kind's signal over the hits alone (no whole-corpus view): dense cosine, or the RRF
    of the hits' dense and BM25 scores ranked among themselves."""
    dense = dense_similarities(state, deps, hits)
    if not kind.hybrid:
        return dense
    bm25 = np.array([0.0 if h.bm25_score is None else float(h.bm25_score) for h in hits], dtype=float)
    return hybrid_signal(np.nan_to_num(dense, nan=-1.0), bm25, hybrid_k or HYBRID_RRF_K)


def corpus_view(state: RunState, deps: Deps, hits: list[Hit], kind: ScoreKind = ScoreKind.RAW,
                hybrid_k: int | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """(signal values, top-1 value, 1-based ranks) of the hits against the whole index, as the
    calibration measured them; over the hits alone when the index cannot score every row."""
    everything = corpus_signal(state, deps, kind, hybrid_k)
    if everything is None:
        values = hits_signal(state, deps, hits, kind, hybrid_k)
        return values, float(values.max()), ranks_of(values)
    values = everything[[h.row for h in hits]]
    ordered = np.sort(everything)
    ranks = ordered.size - np.searchsorted(ordered, values, side="right") + 1.0
    return values, float(ordered[-1]), ranks


def corpus_candidates(state: RunState, deps: Deps, limit: int, have: set[str], kind: ScoreKind = ScoreKind.RAW,
                      hybrid_k: int | None = None) -> list[Hit]:
    """The `limit` chunks of the whole index best by the kind's signal (the metadata filter applies),
    those not among `have`; the cutoff then decides which pass. Empty without a whole-index view."""
    store = getattr(deps.index, "store", None)
    everything = corpus_signal(state, deps, kind, hybrid_k) if store is not None else None
    if everything is None:
        return []
    order = np.argsort(-everything, kind="stable")
    top = order[: max(limit * 2, limit + len(have))]
    admit = getattr(deps.retriever, "admit", None)
    if admit is not None and getattr(deps.retriever, "where", None) is not None:
        top = order  # a filter (metadata, or the caller's access): the best admitted rows, however deep
    rows = [int(r) for r in (admit(top.tolist()) if admit is not None else top.tolist())][:limit]
    out = []
    for row, cosine in zip(rows, row_similarities(state, deps, rows)):
        chunk = store.get(row)
        if chunk.chunk_id not in have:
            out.append(Hit(chunk=chunk, row=row, score=float(everything[row]), dense_score=float(cosine),
                           extra={"conformal_corpus": 1.0}))
    return out
