"""The `calibrate` workflow (CONFLARE): measure where answers sit in the similarity ranking.

Generated questions: sample chunks (seeded); `calibrate_question.j2` makes the LLM
write one question and its answer per chunk. For each question walk the chunks in
order of dense similarity and stop at the first that contains the answer — the LLM
judges each chunk with `calibrate_contains.j2`; the source chunk is the known positive,
so the walk ends there at the latest. Its similarity, the query's top-1 similarity and
its rank are recorded. A question whose positive lies beyond `depth` chunks is *not
found*: counted, reported and kept with an infinite score (conservative: the
threshold grows instead of the calibration set being silently biased).

Qrels questions (BEIR queries.jsonl + qrels tsv): the positive is the best-ranked chunk
of any document with a positive grade; no LLM is needed.

The records are split (seeded) into calibration and held-out halves; the conformal
threshold of each score kind comes from the calibration half, its coverage and mean set
size from the held-out half (`tools.conformal`). The result is `calibration.json` in the
index root folder, with the corpus fingerprint to detect a changed corpus later.
"""
from __future__ import annotations

import logging
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from agent.beir import read_qrels as beir_qrels, read_queries
from agent.errors import StructuredOutputError, UsageError
from tools.conformal import (ScoreKind, check_alpha, choose_kind, conformal_quantile, evaluate_kinds,
                             positive_scores, smallest_k_for_coverage, CalibrationReport, binomial_tolerance)
from tools.modes import parse_enum

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
FORMAT_VERSION = 1
SIZE_DEPTH = 1000  # similarities kept per held-out query to measure set sizes


class GeneratedQA(BaseModel):
    question: str = Field(min_length=3)
    answer: str = Field(min_length=1)


class ContainsVerdict(BaseModel):
    contains: bool


class CalibrationRecord(BaseModel):
    qid: str
    question: str
    answer: str = ""
    origin: str  # generated | qrels
    source_row: int | None = None
    found: bool
    positive_row: int | None = None
    similarity: float | None = None
    top1: float
    rank: int | None = None
    judge_calls: int = 0
    split: str = "calibration"  # calibration | heldout


class Calibration(BaseModel):
    version: int = FORMAT_VERSION
    created: str
    alpha: float
    score_kind: str
    qhat: dict[str, float | None]  # None means +inf (keep every candidate)
    n_calibration: int
    n_heldout: int
    n_not_found: int
    n_generation_failed: int = 0
    judge_errors: int = 0
    depth: int
    seed: int
    origin: str
    models: dict[str, str]
    corpus_fingerprint: str | None
    report: dict
    records: list[CalibrationRecord]

    @property
    def kind(self) -> ScoreKind:
        return ScoreKind(self.score_kind)

    def arrays(self, split: str | None = "calibration") -> dict[str, np.ndarray]:
        rows = [r for r in self.records if split is None or r.split == split]
        return _arrays(rows)

    def threshold(self, kind: ScoreKind | None = None, alpha: float | None = None) -> float:
        """q for `kind` at `alpha` (defaults: the calibrated ones), from the calibration split."""
        kind = kind or self.kind
        if alpha is None and kind.value in self.qhat:
            value = self.qhat[kind.value]
            return math.inf if value is None else float(value)
        return conformal_quantile(positive_scores(kind, **self.arrays()), check_alpha(alpha or self.alpha))

    def positive_similarities(self) -> list[float]:
        return [float(r.similarity) for r in self.records if r.found and r.similarity is not None]


def _arrays(rows: list[CalibrationRecord]) -> dict[str, np.ndarray]:
    return {"similarity": np.array([r.similarity if r.found else 0.0 for r in rows], dtype=float),
            "top1": np.array([r.top1 for r in rows], dtype=float),
            "rank": np.array([r.rank if r.found else math.inf for r in rows], dtype=float),
            "found": np.array([r.found for r in rows], dtype=bool)}


def _top(sims: np.ndarray) -> np.ndarray:
    """The SIZE_DEPTH largest similarities (enough to count a query's kept set), best first."""
    if sims.size > SIZE_DEPTH:
        sims = np.partition(sims, sims.size - SIZE_DEPTH)[-SIZE_DEPTH:]
    return np.sort(sims)[::-1]


def calibration_path(root: str | Path) -> Path:
    return Path(root) / CALIBRATION_FILE


def save_calibration(calibration: Calibration, root: str | Path) -> Path:
    path = calibration_path(root)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(calibration.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def load_calibration(root: str | Path, fingerprint: str | None = None) -> tuple[Calibration | None, list[str]]:
    """The saved calibration (or None) and warnings, e.g. a corpus changed since calibrating."""
    path = calibration_path(root)
    if not path.is_file():
        return None, []
    try:
        cal = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path} is not a valid calibration file ({exc}); run `ragsieve calibrate` again") from exc
    warnings = []
    if fingerprint and cal.corpus_fingerprint and fingerprint != cal.corpus_fingerprint:
        warnings.append(f"the corpus changed since calibration ({cal.corpus_fingerprint[:12]} -> {fingerprint[:12]}): "
                        f"the threshold may no longer hold; run `ragsieve calibrate` again")
        log.warning("%s: %s", path, warnings[-1])
    return cal, warnings


def read_qrels(queries_path: str | Path, qrels_path: str | Path) -> list[tuple[str, str, list[str]]]:
    """(query id, text, positive doc ids) from BEIR queries.jsonl and a qrels tsv (`agent.beir`)."""
    texts = read_queries(queries_path)
    positives = {qid: [doc for doc, grade in docs.items() if grade > 0] for qid, docs in beir_qrels(qrels_path).items()}
    return [(qid, texts[qid], docs) for qid, docs in positives.items() if docs and qid in texts]


class Calibrator:
    """Builds a `Calibration` for one index; `run()` does the work, the caller saves it."""

    def __init__(self, index, *, llm=None, prompts=None, alpha: float = 0.1, depth: int = 20, seed: int = 0,
                 heldout_fraction: float = 0.5, passage_chars: int = 1500, min_chunk_chars: int = 80,
                 score_kind: str = "auto", llm_name: str = ""):
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

    def run(self, *, questions: int | None = None, queries_path=None, qrels_path=None) -> Calibration:
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
        return np.asarray(self.index.vectors, dtype=np.float64) @ np.asarray(qvec, dtype=np.float64)

    def _record(self, qid, question, answer, origin, sims, positive_rows, source_row=None, judge=None):
        order = np.argsort(-sims, kind="stable")
        found_row, calls = None, 0
        for position, row in enumerate(order[: self.depth]):
            row = int(row)
            if row in positive_rows:
                found_row = row
                break
            if judge is not None:
                calls += 1
                if judge(row):
                    found_row = row
                    break
        rank = None if found_row is None else int(np.flatnonzero(order == found_row)[0]) + 1
        return CalibrationRecord(qid=qid, question=question, answer=answer, origin=origin, source_row=source_row,
                                 found=found_row is not None, positive_row=found_row,
                                 similarity=None if found_row is None else float(sims[found_row]),
                                 top1=float(sims[order[0]]), rank=rank, judge_calls=calls)

    def _from_qrels(self, queries_path, qrels_path, limit):
        items = read_qrels(queries_path, qrels_path)
        if limit:
            rng = np.random.default_rng(self.seed)
            items = [items[i] for i in sorted(rng.choice(len(items), size=min(limit, len(items)), replace=False))]
        vecs = self.index.embed([text for _, text, _ in items]) if items else []
        records, sims_list = [], []
        for (qid, text, docs), qvec in zip(items, vecs):
            rows = {r for d in docs for r in self.index.store.doc_rows(d)}
            sims = self._similarities(qvec)
            records.append(self._record(qid, text, "", "qrels", sims, rows))
            sims_list.append(_top(sims))
        return records, sims_list

    def _generated(self, n_questions: int):
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
            prompt = self.prompts.render("calibrate_question", passage=chunk.text[: self.passage_chars],
                                         source=chunk.source)
            try:
                qas.append((row, self.llm.structured([{"role": "user", "content": prompt}], GeneratedQA)))
            except StructuredOutputError as exc:
                self.counters["generation_failed"] += 1
                log.info("question generation failed for row %d: %s", row, exc)
        if not qas:
            return [], []
        vecs = self.index.embed([qa.question for _, qa in qas])
        records, sims_list = [], []
        for (row, qa), qvec in zip(qas, vecs):
            sims = self._similarities(qvec)
            records.append(self._record(f"gen-{row}", qa.question, qa.answer, "generated", sims, {row},
                                        source_row=row, judge=lambda r, qa=qa: self._contains(qa, r)))
            sims_list.append(_top(sims))
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

    # -- split, thresholds, report -------------------------------------------------------
    def _finish(self, records: list[CalibrationRecord], sims: list[np.ndarray], origin: str) -> Calibration:
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
        kinds = evaluate_kinds(_arrays(cal_rows), _arrays(held_rows), held_sims, self.alpha)
        chosen, notes = (self.forced, ["score kind forced by the caller"]) if self.forced else \
            choose_kind(kinds, self.alpha, len(held_rows))
        chosen_cov = next(k.coverage for k in kinds if k.kind is chosen)
        fixed_k = smallest_k_for_coverage(_arrays(held_rows)["rank"], chosen_cov)
        n_not_found = sum(1 for r in records if not r.found)
        if n_not_found:
            notes.append(f"{n_not_found} of {len(records)} questions had no chunk containing the answer within "
                         f"depth {self.depth}: kept with an infinite score (counted as not covered)")
        if len(self.index.vectors) > SIZE_DEPTH:
            notes.append(f"set sizes are counted within the top {SIZE_DEPTH} chunks of each query")
        report = CalibrationReport(self.alpha, len(cal_rows), len(held_rows),
                                   binomial_tolerance(1 - self.alpha, len(held_rows)), kinds, chosen, fixed_k, notes)
        manifest = getattr(self.index, "manifest", {}) or {}
        return Calibration(
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"), alpha=self.alpha,
            score_kind=chosen.value, qhat={k.kind.value: None if math.isinf(k.qhat) else k.qhat for k in kinds},
            n_calibration=len(cal_rows), n_heldout=len(held_rows), n_not_found=n_not_found,
            n_generation_failed=self.counters["generation_failed"], judge_errors=self.counters["judge_errors"],
            depth=self.depth, seed=self.seed, origin=origin,
            models={"embedding": str(getattr(self.index, "model_name", "")), "llm": self.llm_name if origin == "generated" else ""},
            corpus_fingerprint=manifest.get("corpus_fingerprint"), report=report.as_dict(), records=records)


def format_report(cal: Calibration) -> str:
    """Human-readable summary printed by `ragsieve calibrate`."""
    r = cal.report
    lines = [f"calibration: {cal.origin} questions, n={cal.n_calibration} calibration / {cal.n_heldout} held-out, "
             f"alpha={cal.alpha} (target coverage {1 - cal.alpha:.2f}, tolerance ±{r['tolerance']:.3f})",
             f"not found within depth {cal.depth}: {cal.n_not_found}; generation failures: {cal.n_generation_failed}; "
             f"judge errors: {cal.judge_errors}",
             f"{'score':<7}{'q':>10}{'coverage':>10}{'mean kept':>11}{'median':>8}"]
    for k in r["kinds"]:
        q = "inf" if k["qhat"] is None else f"{k['qhat']:.4f}"
        mark = "  <- chosen" if k["kind"] == cal.score_kind else ""
        lines.append(f"{k['kind']:<7}{q:>10}{k['coverage']:>10.3f}{k['mean_set_size']:>11.2f}{k['median_set_size']:>8}{mark}")
    fk = r["fixed_top_k_at_equal_coverage"]
    lines.append(f"fixed top-k reaching the same held-out coverage: k = {'n/a' if fk is None else int(fk)}")
    lines.extend(f"note: {n}" for n in r["notes"])
    return "\n".join(lines)
