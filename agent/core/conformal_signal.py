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
from dataclasses import dataclass

import numpy as np

from ragsieve.agent.core.state import RunState
from ragsieve.agent.core.step import Deps
from ragsieve.tools.filters.conformal import HYBRID_RRF_K, ScoreKind, hybrid_signal, ranks_of
from ragsieve.tools.index.backend import CorpusScores, vectors_of
from ragsieve.tools.index.search.dense import corpus_similarities
from ragsieve.tools.types import Hit


@dataclass(frozen=True)
class CorpusCandidates:
    """Threshold retrieval's candidates over the index: `hits` (the best `corpus_max` not already held) and
    `beyond`, the best chunk past the cap (None when the index has no more, or none is admitted)."""

    hits: list[Hit]
    beyond: Hit | None


def query_vector(state: RunState, deps: Deps) -> np.ndarray:
    """The question's embedding (the index remembers recent queries, so this costs one embedding)."""
    return np.asarray(deps.need_index().embed_query(state.question), dtype=float)


def dense_similarities(state: RunState, deps: Deps, hits: list[Hit]) -> np.ndarray:
    """Each hit's dense cosine to the question, from the index vectors.

    Recomputed rather than read from `Hit.dense_score`: hits found by an expanded query
    carry the similarity to that expanded query, not to the question the calibration
    measured. Without vectors (a test double), `Hit.dense_score` is used.
    """
    if deps.index is None or deps.index.vectors is None:
        return np.array([math.nan if h.dense_score is None else float(h.dense_score) for h in hits], dtype=float)
    return row_similarities(state, deps, [h.row for h in hits])


def row_similarities(state: RunState, deps: Deps, rows: list[int]) -> np.ndarray:
    """The dense cosine of each of `rows` (index vectors) to the question."""
    if not rows:
        return np.zeros(0)
    return np.asarray(vectors_of(deps.need_index())[rows], dtype=np.float64) @ query_vector(state, deps)


def corpus_signal(state: RunState, deps: Deps, kind: ScoreKind, hybrid_k: int | None) -> np.ndarray | None:
    """The kind's signal for every index row (None without index vectors, or without whole-corpus
    BM25 scores for a hybrid kind)."""
    index = deps.index
    vectors = index.vectors if index is not None else None
    if index is None or vectors is None:
        return None
    key = (id(index), state.question, kind.hybrid, hybrid_k, len(vectors))
    memo = deps.caches.corpus_signal.peek(key)  # the step asks twice per question (candidates, then view)
    if memo is not None:
        return memo
    bm25 = index.bm25
    if kind.hybrid and not isinstance(bm25, CorpusScores):  # BM25 ranked server-side: no whole-corpus array
        return None
    signal = corpus_similarities(vectors, query_vector(state, deps))
    if kind.hybrid and isinstance(bm25, CorpusScores):
        signal = hybrid_signal(signal, bm25.scores(state.question), hybrid_k or HYBRID_RRF_K)
    return deps.caches.corpus_signal.put(key, signal)


def hits_signal(state: RunState, deps: Deps, hits: list[Hit], kind: ScoreKind, hybrid_k: int | None) -> np.ndarray:
    """The kind's signal over the hits alone (no whole-corpus view): dense cosine, or the RRF
    of the hits' dense and BM25 scores ranked among themselves."""
    dense = dense_similarities(state, deps, hits)
    if not kind.hybrid:
        return dense
    bm25 = np.array([0.0 if h.bm25_score is None else float(h.bm25_score) for h in hits], dtype=float)
    return hybrid_signal(np.nan_to_num(dense, nan=-1.0), bm25, hybrid_k or HYBRID_RRF_K)


def corpus_view(
    state: RunState, deps: Deps, hits: list[Hit], kind: ScoreKind = ScoreKind.RAW, hybrid_k: int | None = None
) -> tuple[np.ndarray, float, np.ndarray]:
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


def corpus_candidates(
    state: RunState, deps: Deps, limit: int, have: set[str], kind: ScoreKind = ScoreKind.RAW, hybrid_k: int | None = None
) -> CorpusCandidates:
    """The `limit` chunks of the whole index best by the kind's signal (the metadata filter applies),
    those not among `have`; the cutoff then decides which pass. `beyond` is the best admitted chunk past
    the limit (not among `have`): when it passes the cutoff too, the cap bound. Empty without a
    whole-index view."""
    everything = corpus_signal(state, deps, kind, hybrid_k) if deps.index is not None else None
    if deps.index is None or everything is None:
        return CorpusCandidates([], None)
    store = deps.index.store
    order = np.argsort(-everything, kind="stable")
    top = order[: max(limit * 2, limit + len(have)) + 1]
    if deps.retriever is not None and deps.retriever.where is not None:
        top = order  # a filter (metadata, or the caller's access): the best admitted rows, however deep
    admitted = [int(r) for r in deps.admitted(top.tolist())]
    rows = admitted[:limit]
    out = []
    for row, cosine in zip(rows, row_similarities(state, deps, rows)):
        chunk = store.get(row)
        if chunk.chunk_id not in have:
            out.append(
                Hit(
                    chunk=chunk, row=row, score=float(everything[row]), dense_score=float(cosine), extra={"conformal_corpus": 1.0}
                )
            )
    beyond = None
    for row in admitted[limit:]:  # bounded by `top`: the first chunk past the cap that the pool does not hold
        chunk = store.get(row)
        if chunk.chunk_id not in have:
            cosine = float(row_similarities(state, deps, [row])[0])
            beyond = Hit(chunk=chunk, row=row, score=float(everything[row]), dense_score=cosine, extra={"conformal_corpus": 1.0})
            break
    return CorpusCandidates(out, beyond)
