"""The `calibrate` workflow (CONFLARE): measure where answers sit in the similarity ranking.

Generated questions: sample chunks (seeded); `calibrate_question.j2` makes the LLM
write one question and its answer per chunk. For each question walk the chunks in
order of dense similarity and stop at the first that contains the answer — the LLM
judges each chunk with `calibrate_contains.j2`; the source chunk is the known positive,
so the walk ends there at the latest. Its similarity, the query's top-1 similarity and
its rank are recorded; so are the hybrid signal (RRF of the dense and BM25 ranks over the
corpus), its top-1 and rank for the best-known positive by that signal: for qrels the best gold
chunk, for generated questions the best of the source chunk and the judged positive (a chunk
the walk did not judge may also contain the answer: the recorded score is then an upper bound,
which can only make q larger, i.e. conservative). A question whose positive lies beyond `depth` chunks is *not
found*: counted, reported and kept with an infinite score (conservative: the
threshold grows instead of the calibration set being silently biased).

Qrels questions (BEIR queries.jsonl + qrels tsv): the positive is the best-ranked chunk
of any document with a positive grade; no LLM is needed.

The records are split (seeded) into calibration and held-out halves; the conformal
threshold of each score kind comes from the calibration half, its coverage and mean set
size from the held-out half (`ragsieve.tools.filters.conformal`). The result is `calibration.json` in the
index root folder, with the corpus fingerprint to detect a changed corpus later.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.agent.calibration.abstention import build_abstention
from ragsieve.agent.calibration.questions import ContainsVerdict, GeneratedQA, calibration_warnings, read_qrels
from ragsieve.agent.calibration.store import Calibration, CalibrationRecord, record_arrays
from ragsieve.agent.calibration.walk import SIZE_DEPTH, top_similarities, walk_record
from ragsieve.agent.errors import LLMError, StructuredOutputError, UsageError
from ragsieve.agent.llm.deadlines import is_slow_call
from ragsieve.tools.filters.abstention import top1_excluding
from ragsieve.tools.filters.conformal import (
    HYBRID_RRF_K,
    CalibrationReport,
    ScoreKind,
    binomial_tolerance,
    check_alpha,
    choose_kind,
    evaluate_kinds,
    hybrid_signal,
    smallest_k_for_coverage,
)
from ragsieve.tools.index.backend import CorpusScores, IndexBackend, vectors_of
from ragsieve.tools.index.embedders import embedding_identity
from ragsieve.tools.index.search.dense import corpus_similarities
from ragsieve.tools.modes import parse_enum

log = logging.getLogger(__name__)


class Calibrator:
    """Builds a `Calibration` for one index; `run()` does the work, the caller saves it."""

    def __init__(
        self,
        index: IndexBackend,
        *,
        llm: Any = None,
        prompts: Any = None,
        alpha: float = 0.1,
        depth: int = 20,
        seed: int = 0,
        heldout_fraction: float = 0.5,
        passage_chars: int = 1500,
        min_chunk_chars: int = 80,
        score_kind: str = "auto",
        llm_name: str = "",
    ) -> None:
        self.alpha = check_alpha(alpha)
        if depth < 1:
            raise UsageError(f"search depth must be >= 1, got {depth}")
        if not 0.0 < heldout_fraction < 1.0:
            raise UsageError(f"heldout fraction must be in (0, 1), got {heldout_fraction}")
        self.forced = None if score_kind == "auto" else parse_enum(ScoreKind, score_kind, "score kind")
        self.index, self.llm, self.prompts = index, llm, prompts
        self.depth, self.seed, self.heldout_fraction = int(depth), int(seed), float(heldout_fraction)
        self.passage_chars, self.min_chunk_chars, self.llm_name = passage_chars, min_chunk_chars, llm_name
        self.counters = {"generation_failed": 0, "judge_errors": 0}
        self.unanswerable: list[str] = []

    def run(
        self,
        *,
        questions: int | None = None,
        queries_path: str | Path | None = None,
        qrels_path: str | Path | None = None,
        unanswerable: list[str] | None = None,
    ) -> Calibration:
        """`unanswerable`: questions known to have no answer in the corpus (labelled abstention
        calibration); without them, each question asked with its own document held out is the proxy."""
        self.unanswerable = [u for u in (unanswerable or []) if u and u.strip()]
        if (queries_path is None) != (qrels_path is None):
            raise UsageError("a qrels calibration set needs both queries.jsonl and the qrels tsv")
        if queries_path is not None:
            origin = "qrels"
            records, sims = self._from_qrels(queries_path, qrels_path, questions)
        else:
            if not questions or questions < 2:
                raise UsageError(f"--questions must be >= 2 to split calibration and held-out, got {questions}")
            if self.llm is None or self.prompts is None:
                raise UsageError("generated calibration questions need an LLM and the prompt templates")
            origin = "generated"
            records, sims = self._generated(questions)
        if len(records) < 2:
            raise UsageError(f"only {len(records)} usable calibration questions: need at least 2")
        return self._finish(records, sims, origin)

    # -- building records ------------------------------------------------------------
    def _similarities(self, qvec: np.ndarray) -> np.ndarray:
        return corpus_similarities(vectors_of(self.index), qvec)

    def _hybrid(self, question: str, sims: np.ndarray) -> np.ndarray | None:
        """The hybrid signal of every chunk, or None when the index has no whole-corpus BM25 scores."""
        bm25 = self.index.bm25
        if not isinstance(bm25, CorpusScores):  # Milvus ranks BM25 server-side: no whole-corpus array
            return None
        return hybrid_signal(sims, bm25.scores(question), HYBRID_RRF_K)

    def _view(self, sims: np.ndarray, hybrid: np.ndarray | None) -> Any:
        """What a held-out query keeps is counted on: its best similarities (and hybrid signals)."""
        return top_similarities(sims) if hybrid is None else {"dense": top_similarities(sims), "hybrid": top_similarities(hybrid)}

    def _from_qrels(self, queries_path: Any, qrels_path: Any, limit: int | None) -> Any:
        items = read_qrels(queries_path, qrels_path)
        if limit:
            rng = np.random.default_rng(self.seed)
            items = [items[i] for i in sorted(rng.choice(len(items), size=min(limit, len(items)), replace=False))]
        vecs = self.index.embed([text for _, text, _ in items]) if items else np.zeros((0, 0), dtype=np.float32)
        records, sims_list = [], []
        for (qid, text, docs), qvec in zip(items, vecs):
            rows = {r for d in docs for r in self.index.store.doc_rows(d)}
            sims = self._similarities(qvec)
            hybrid = self._hybrid(text, sims)
            records.append(
                walk_record(qid, text, "", "qrels", sims, rows, depth=self.depth, hybrid=hybrid).model_copy(
                    update={"heldout_top1": top1_excluding(sims, sorted(rows))}
                )
            )
            sims_list.append(self._view(sims, hybrid))
        return records, sims_list

    def _generated(self, n_questions: int) -> Any:
        store = self.index.store
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(store.count())
        qas: list[tuple[int, GeneratedQA]] = []
        for row in (int(r) for r in order):
            if len(qas) >= n_questions:
                break
            chunk = store.get(row)
            if len(chunk.text.strip()) < self.min_chunk_chars:
                continue
            prompt = self.prompts.render("calibrate_question", passage=chunk.text[: self.passage_chars], source=chunk.source)
            try:
                qas.append((row, self.llm.structured([{"role": "user", "content": prompt}], GeneratedQA)))
            except StructuredOutputError as exc:
                self.counters["generation_failed"] += 1
                log.info("question generation failed for row %d: %s", row, exc)
            except LLMError as exc:  # a slow call (busy machine) skips this passage, counted; others stop the run
                if not is_slow_call(exc):
                    raise
                self.counters["generation_failed"] += 1
                log.warning("question generation for row %d skipped (slow LLM call): %s", row, exc)
        if not qas:
            return [], []
        vecs = self.index.embed([qa.question for _, qa in qas])
        records, sims_list = [], []
        for (row, qa), qvec in zip(qas, vecs):
            sims = self._similarities(qvec)
            hybrid = self._hybrid(qa.question, sims)
            record = walk_record(
                f"gen-{row}",
                qa.question,
                qa.answer,
                "generated",
                sims,
                {row},
                depth=self.depth,
                source_row=row,
                judge=partial(self._contains, qa),
                hybrid=hybrid,
            )
            own = sorted(self.index.store.doc_rows(store.get(row).doc_id)) or [row]
            records.append(record.model_copy(update={"heldout_top1": top1_excluding(sims, own)}))
            sims_list.append(self._view(sims, hybrid))
        return records, sims_list

    def _contains(self, qa: GeneratedQA, row: int) -> bool:
        text = self.index.store.get(row).text[: self.passage_chars]
        prompt = self.prompts.render("calibrate_contains", question=qa.question, answer=qa.answer, passage=text)
        try:
            return self.llm.structured([{"role": "user", "content": prompt}], ContainsVerdict).contains
        except StructuredOutputError as exc:
            self.counters["judge_errors"] += 1
            log.info("contains-judge failed on row %d: %s", row, exc)
            return False
        except LLMError as exc:
            if not is_slow_call(exc):
                raise
            self.counters["judge_errors"] += 1
            log.warning("contains-judge on row %d skipped (slow LLM call): %s", row, exc)
            return False

    def _abstention(self, records: list[CalibrationRecord], rng: np.random.Generator) -> Any:
        """Answerability scores: the records' top-1 (answerable) against labelled unanswerable
        questions (split half/half, seeded) or the held-out-document proxy (the records' split)."""
        answerable = [(r.top1, r.split == "heldout") for r in records]
        if self.unanswerable:
            vecs = self.index.embed(self.unanswerable)
            held = set(int(i) for i in rng.permutation(len(vecs))[: len(vecs) // 2])
            scores = [(float(corpus_similarities(vectors_of(self.index), v).max()), i in held) for i, v in enumerate(vecs)]
            return build_abstention(answerable, scores, "labelled")
        proxy = [(r.heldout_top1, r.split == "heldout") for r in records if r.heldout_top1 is not None]
        return build_abstention(answerable, proxy, "heldout-document")

    # -- split, thresholds, report -------------------------------------------------------
    def _finish(self, records: list[CalibrationRecord], sims: list, origin: str) -> Calibration:
        rng = np.random.default_rng(self.seed + 1)
        perm = rng.permutation(len(records))
        n_held = min(max(1, int(round(len(records) * self.heldout_fraction))), len(records) - 1)
        held_idx = set(int(i) for i in perm[:n_held])
        for i, rec in enumerate(records):
            rec.split = "heldout" if i in held_idx else "calibration"
        cal_rows = [r for r in records if r.split == "calibration"]
        held = [(r, s) for r, s in zip(records, sims) if r.split == "heldout"]
        held_rows = [r for r, _ in held]
        held_sims = [s for _, s in held]
        kinds = evaluate_kinds(record_arrays(cal_rows), record_arrays(held_rows), held_sims, self.alpha)
        if self.forced and self.forced not in {k.kind for k in kinds}:
            raise UsageError(
                f"score kind {self.forced.value!r} needs whole-corpus BM25 scores, which this index "
                f"does not provide; choose one of {[k.kind.value for k in kinds]}"
            )
        chosen, notes = (
            (self.forced, ["score kind forced by the caller"]) if self.forced else choose_kind(kinds, self.alpha, len(held_rows))
        )
        chosen_cov = next(k.coverage for k in kinds if k.kind is chosen)
        fixed_k = smallest_k_for_coverage(record_arrays(held_rows)["rank"], chosen_cov)
        n_not_found = sum(1 for r in records if not r.found)
        if n_not_found:
            notes.append(
                f"{n_not_found} of {len(records)} questions had no chunk containing the answer within "
                f"depth {self.depth}: kept with an infinite score (counted as not covered)"
            )
        notes.extend(calibration_warnings(len(cal_rows), self.alpha, next(k.qhat for k in kinds if k.kind is chosen)))
        if len(vectors_of(self.index)) > SIZE_DEPTH:
            notes.append(f"set sizes are counted within the top {SIZE_DEPTH} chunks of each query")
        report = CalibrationReport(
            self.alpha,
            len(cal_rows),
            len(held_rows),
            binomial_tolerance(1 - self.alpha, len(held_rows)),
            kinds,
            chosen,
            fixed_k,
            notes,
        )
        manifest = self.index.manifest or {}
        abstention = self._abstention(records, rng)
        return Calibration(
            abstention=abstention,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            alpha=self.alpha,
            score_kind=chosen.value,
            qhat={k.kind.value: None if math.isinf(k.qhat) else k.qhat for k in kinds},
            n_calibration=len(cal_rows),
            n_heldout=len(held_rows),
            n_not_found=n_not_found,
            n_generation_failed=self.counters["generation_failed"],
            judge_errors=self.counters["judge_errors"],
            depth=self.depth,
            seed=self.seed,
            origin=origin,
            models={
                "embedding": str(self.index.model_name),
                "embedding_identity": embedding_identity(manifest.get("embedding") or {}),
                "llm": self.llm_name if origin == "generated" else "",
            },
            corpus_fingerprint=manifest.get("corpus_fingerprint"),
            report=report.as_dict(),
            records=records,
            hybrid_k=HYBRID_RRF_K if all(r.hybrid_top1 is not None for r in records) else None,
        )
