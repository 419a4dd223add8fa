"""Relevant segment extraction on the context (dsRAG RSE, `ragsieve.tools.filters.segments`).

The candidate documents are those of the context; every pool chunk of them is valued
(dsRAG values every retrieved chunk, not only the few in the context). Absolute
relevance: RRF/hybrid scores are ranks, so each valued chunk's dense cosine
is mapped to [0, 1] — by the empirical CDF of the calibration positives' similarities
when `calibration.json` exists ("calibrated"), else by a fixed cosine window and
dsRAG's Beta transform ("cosine"). Rank is the chunk's 0-based rank by similarity among
all candidates (pool and context); values get dsRAG's chunk-length adjustment. Chunks
outside the pool are worth -penalty, so a segment only bridges them when the chunks
around are worth it (sandwiched chunks).

The context becomes the chosen segments, most valuable document first, each segment's
chunks in document order; with `merge` each segment is one passage whose text is
rebuilt from the chunk store. Context chunks a trusted judge called relevant, or the
sparse fallback added, stay even outside every segment; so do, with `keep_evidence` (default),
the conformal set's chunks and the fast-context chunks the conformal step joined (no trusted judge):
RSE then shapes the context (segments, sandwiched chunks) without undoing the conformal coverage or
holding less than the stage before. With `keep_evidence = false` RSE may drop conformal members;
the conformal record then says coverage is reduced (`CoverageLoss.SEGMENTS`). With no segment worth
`minimum_value`, the context is left unchanged and the trace says so.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ragsieve.agent.config import Config, SegmentConfig
from ragsieve.agent.core.conformal_signal import dense_similarities
from ragsieve.agent.core.evidence import cached_calibration, candidate_hits, judged_evidence
from ragsieve.agent.core.state import CoverageLoss, RunState, SegmentRecord
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.agent.core.summaries import SegmentsSummary
from ragsieve.agent.errors import UsageError
from ragsieve.tools.filters.segments import (
    RSEParams,
    adjust_for_chunk_length,
    best_segments,
    chunk_values,
    preset_params,
    relevance_from_calibration,
    relevance_from_cosine,
)
from ragsieve.tools.types import Chunk, Hit


def params_of(cfg: SegmentConfig) -> RSEParams:
    return preset_params(
        cfg.preset,
        max_length=cfg.max_length,
        overall_max_length=cfg.overall_max_length,
        minimum_value=cfg.minimum_value,
        irrelevant_chunk_penalty=cfg.irrelevant_chunk_penalty,
        decay_rate=cfg.decay_rate,
    )


class Segments(Step[Next]):
    name = "segments"

    @classmethod
    def check_config(cls, config: Config) -> None:
        cfg = config.segments
        if cfg.enabled:
            params_of(cfg)
            # "auto" falls back to cosine without a calibration: checked here, before any LLM call
            if cfg.relevance in ("cosine", "auto") and cfg.cosine_low >= cfg.cosine_high:
                raise UsageError(f"segments.cosine_low {cfg.cosine_low} must be below cosine_high {cfg.cosine_high}")

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        cfg = deps.config.segments
        before = [h.chunk_id for h in state.context]
        if not cfg.enabled:
            return StepResult("next", SegmentsSummary(status="disabled", kept=before, removed=[]))
        if not state.context:
            return StepResult("next", SegmentsSummary(status="empty", kept=[], removed=[]))
        params = params_of(cfg)
        hits = candidate_hits(state)
        sims = dense_similarities(state, deps, hits)
        rank0 = {h.chunk_id: r for r, h in enumerate(hits[i] for i in np.argsort(-sims, kind="stable"))}
        sim_of = {h.chunk_id: float(s) for h, s in zip(hits, sims)}
        docs = list(OrderedDict.fromkeys(h.chunk.doc_id for h in state.context))
        # every pool chunk of a candidate document is valued from its own relevance evidence
        valued = [h for h in hits if h.chunk.doc_id in set(docs)]
        mode, relevance = self._relevance(cfg, deps, [sim_of[h.chunk_id] for h in valued])
        values = chunk_values(relevance, [rank0[h.chunk_id] for h in valued], params)
        if cfg.chunk_length_adjustment:
            values = adjust_for_chunk_length(values, [len(h.chunk.text) for h in valued])
        value_of = {h.row: float(v) for h, v in zip(valued, values)}
        by_row = {h.row: h for h in valued}

        store = deps.need_index().store
        array: list[float] = []
        rows_at: list[int] = []
        splits: list[int] = []
        for doc_id in docs:
            doc_rows = store.doc_rows(doc_id)
            positions = [p for p, r in enumerate(doc_rows) if r in value_of]
            lo, hi = max(0, min(positions) - params.max_length), min(len(doc_rows), max(positions) + params.max_length + 1)
            if array:
                splits.append(len(array))
            for r in doc_rows[lo:hi]:
                rows_at.append(r)
                array.append(value_of.get(r, -params.irrelevant_chunk_penalty))
        segments = best_segments(array, params.max_length, params.overall_max_length, params.minimum_value, splits)
        summary = SegmentsSummary(
            status="applied",
            preset=cfg.preset,
            params=params.__dict__,
            relevance=mode,
            values={h.chunk_id: round(value_of[h.row], 4) for h in valued},
        )
        if not segments:
            summary.status = "no_segment"
            summary.kept, summary.removed = before, []
            summary.note = f"no segment reached minimum_value={params.minimum_value}: context left unchanged"
            return StepResult("next", summary)

        built = []
        described: list[dict[str, Any]] = []
        for seg in segments:
            seg_rows = rows_at[seg.start : seg.end]
            chunks = store.get_many(seg_rows)
            described.append(
                {"doc_id": chunks[0].doc_id, "chunk_ids": [c.chunk_id for c in chunks], "value": round(seg.value, 4)}
            )
            built.append((seg, seg_rows, chunks))
        best_of_doc: dict[str, float] = {}
        for seg, _, chunks in built:
            best_of_doc[chunks[0].doc_id] = max(best_of_doc.get(chunks[0].doc_id, -np.inf), seg.value)
        built.sort(key=lambda b: (-best_of_doc[b[2][0].doc_id], b[2][0].doc_id, b[0].start))
        context: list[Hit] = []
        for seg, seg_rows, chunks in built:
            if cfg.merge:
                context.append(_merged(seg_rows, chunks, seg.value, [sim_of.get(c.chunk_id) for c in chunks]))
            else:
                context.extend(
                    by_row.get(r) or Hit(chunk=c, row=r, score=0.0, extra={"sandwiched": 1.0}) for r, c in zip(seg_rows, chunks)
                )
        members = [cid for d in described for cid in d["chunk_ids"]]
        protected = _protected(state, set(members), cfg.keep_evidence)
        context.extend(protected)
        members.extend(h.chunk_id for h in protected)
        lost = [i for i in before if i not in members and state.conformal is not None and i in state.conformal.passing]
        if lost and state.conformal is not None:  # keep_evidence = false: RSE dropped conformal members
            if CoverageLoss.SEGMENTS not in state.conformal.reduced:
                state.conformal.reduced.append(CoverageLoss.SEGMENTS)
            note = (
                f"segments.keep_evidence = false: RSE left {len(lost)} chunks of the conformal set out, so "
                f"coverage {state.conformal.coverage:.2f} is not guaranteed for this answer"
            )
            summary.coverage_note = note
            if note not in state.notes:
                state.notes.append(note)
        state.context = context
        state.segments = [SegmentRecord(**d) for d in described]
        summary.segments = sorted(described, key=lambda d: -d["value"])
        summary.kept = [i for i in before if i in members]
        summary.removed = [i for i in before if i not in members]
        summary.added = [i for i in members if i not in before]
        summary.context = [h.chunk_id for h in context]
        summary.protected = [h.chunk_id for h in protected]
        return StepResult("next", summary)

    @staticmethod
    def _relevance(cfg: SegmentConfig, deps: Deps, sims: list[float]) -> tuple[str, np.ndarray]:
        mode = cfg.relevance
        cal = None
        if mode in ("auto", "calibrated"):
            cal, _, path = cached_calibration(deps)
            if cal is None and mode == "calibrated":
                raise UsageError(
                    f"segments.relevance = 'calibrated' needs a calibration at {path}: "
                    f"run `ragsieve calibrate` or use relevance = 'cosine' / 'auto'"
                )
        if cal is not None and cal.positive_similarities():
            return "calibrated", relevance_from_calibration(sims, cal.positive_similarities())
        return "cosine", relevance_from_cosine(sims, cfg.cosine_low, cfg.cosine_high)


def _merged(rows: list[int], chunks: list[Chunk], value: float, sims: list[float | None]) -> Hit:
    first, last = chunks[0], chunks[-1]
    chunk = Chunk(
        doc_id=first.doc_id,
        chunk_index=first.chunk_index,
        text="\n".join(c.text for c in chunks),
        source=first.source,
        title=first.title,
        kind=first.kind,
        line_start=first.line_start,
        line_end=last.line_end if last.line_end is not None else first.line_end,
    )
    known = [s for s in sims if s is not None]
    return Hit(
        chunk=chunk,
        row=rows[0],
        score=float(value),
        dense_score=max(known) if known else None,
        extra={"segment_value": float(value), "segment_chunks": float(len(chunks))},
    )


def _protected(state: RunState, members: set[str], keep_evidence: bool) -> list[Hit]:
    """Context chunks outside every segment that stay: a trusted judge called them relevant or the
    sparse fallback added them (evidence RSE's similarity values do not see) and, with
    `keep_evidence`, they passed the conformal cutoff (RSE must not undo its coverage) or the
    conformal step joined them from the fast context (no trusted judge: it promised to keep them)."""
    keep = judged_evidence(state)
    if keep_evidence and state.conformal is not None:
        keep |= set(state.conformal.passing) | set(state.conformal.promised)
    return [h for h in state.context if h.chunk_id not in members and h.chunk_id in keep]
