"""The saved calibration: `calibration.json` in the index folder (records, thresholds, report)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ragsieve.agent.calibration.abstention import AbstentionCalibration
from ragsieve.agent.errors import UsageError
from ragsieve.agent.judging.measure import JudgeReliability
from ragsieve.tools.filters.conformal import ScoreKind, check_alpha, conformal_quantile, positive_scores

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
FORMAT_VERSION = 1


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
    # the hybrid signal (RRF of dense and BM25 ranks, `hybrid_k`) of the best-known positive by that signal
    hybrid_row: int | None = None
    hybrid: float | None = None
    hybrid_top1: float | None = None
    hybrid_rank: int | None = None
    split: str = "calibration"  # calibration | heldout
    heldout_top1: float | None = None  # top-1 cosine with the question's own document(s) held out (abstention proxy)


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
    hybrid_k: int | None = None  # RRF k of the records' hybrid signal; None: no hybrid score kinds
    judges: dict[str, JudgeReliability] = {}  # model name -> its measured recall (`ragsieve calibrate --judge`)
    abstention: AbstentionCalibration | None = None  # answerability scores (ragsieve.agent.calibration.abstention)

    @property
    def kind(self) -> ScoreKind:
        return ScoreKind(self.score_kind)

    def arrays(self, split: str | None = "calibration") -> dict[str, np.ndarray]:
        rows = [r for r in self.records if split is None or r.split == split]
        return record_arrays(rows)

    def threshold(self, kind: ScoreKind | None = None, alpha: float | None = None) -> float:
        """q for `kind` at `alpha` (defaults: the calibrated ones), from the calibration split."""
        kind = kind or self.kind
        if alpha is None and kind.value in self.qhat:
            value = self.qhat[kind.value]
            return math.inf if value is None else float(value)
        return conformal_quantile(positive_scores(kind, **self.arrays()), check_alpha(alpha or self.alpha))

    def ranks(self) -> np.ndarray:
        """Similarity rank of each question's answer-bearing chunk (inf: not within the depth)."""
        return record_arrays(self.records)["rank"]

    def positive_similarities(self) -> list[float]:
        return [float(r.similarity) for r in self.records if r.found and r.similarity is not None]


def record_arrays(rows: list[CalibrationRecord]) -> dict[str, np.ndarray]:
    return {
        "similarity": np.array([r.similarity if r.found else 0.0 for r in rows], dtype=float),
        "top1": np.array([r.top1 for r in rows], dtype=float),
        "rank": np.array([r.rank if r.found else math.inf for r in rows], dtype=float),
        "found": np.array([r.found for r in rows], dtype=bool),
        "hybrid": np.array([math.nan if r.hybrid is None else r.hybrid for r in rows], dtype=float),
        "hybrid_top1": np.array([math.nan if r.hybrid_top1 is None else r.hybrid_top1 for r in rows], dtype=float),
        "hybrid_rank": np.array([math.inf if r.hybrid_rank is None else r.hybrid_rank for r in rows], dtype=float),
        "hybrid_found": np.array([r.hybrid is not None for r in rows], dtype=bool),
    }


def calibration_path(root: str | Path) -> Path:
    return Path(root) / CALIBRATION_FILE


def save_calibration(calibration: Calibration, root: str | Path) -> Path:
    path = calibration_path(root)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(calibration.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def load_calibration(
    root: str | Path, fingerprint: str | None = None, embedding: dict | None = None
) -> tuple[Calibration | None, list[str]]:
    """The saved calibration (or None) and warnings, e.g. a corpus changed since calibrating. `embedding` (the
    index manifest's record of its embedding provider): a calibration made in another embedding space (another
    provider, model, dimension or precision) holds nothing about this one, so it is not returned."""
    path = calibration_path(root)
    if not path.is_file():
        return None, []
    try:
        cal = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path} is not a valid calibration file ({exc}); run `ragsieve calibrate` again") from exc
    warnings = []
    stale = embedding_changed(cal, embedding)
    if stale:
        warnings.append(stale)
        log.warning("%s: %s", path, stale)
        return None, warnings
    if fingerprint and cal.corpus_fingerprint and fingerprint != cal.corpus_fingerprint:
        warnings.append(
            f"the corpus changed since calibration ({cal.corpus_fingerprint[:12]} -> {fingerprint[:12]}): "
            f"the threshold may no longer hold; run `ragsieve calibrate` again"
        )
        log.warning("%s: %s", path, warnings[-1])
    return cal, warnings


def embedding_changed(cal: Calibration, embedding: dict | None) -> str | None:
    """Why `cal` no longer fits an index embedding as `embedding` says (None: it fits, or nothing to compare)."""
    from ragsieve.tools.index.embedders import embedding_identity

    if not embedding:
        return None
    now = embedding_identity(embedding)
    then = cal.models.get("embedding_identity")
    if then is None:  # a calibration from before identities: the model name is all it recorded
        then_model = cal.models.get("embedding")
        if not then_model or then_model == embedding.get("model"):
            return None
        then = then_model
    if then == now:
        return None
    return (
        f"the calibration was made with embeddings {then}; the index now embeds with {now}: its thresholds do "
        f"not hold in another embedding space, so it is not used; run `ragsieve calibrate` again"
    )


def format_report(cal: Calibration) -> str:
    """Human-readable summary printed by `ragsieve calibrate`."""
    r = cal.report
    lines = [
        f"calibration: {cal.origin} questions, n={cal.n_calibration} calibration / {cal.n_heldout} held-out, "
        f"alpha={cal.alpha} (target coverage {1 - cal.alpha:.2f}, tolerance ±{r['tolerance']:.3f})",
        f"not found within depth {cal.depth}: {cal.n_not_found}; generation failures: {cal.n_generation_failed}; "
        f"judge errors: {cal.judge_errors}",
        f"{'score':<13}{'q':>10}{'coverage':>10}{'mean kept':>11}{'median':>8}",
    ]
    for k in r["kinds"]:
        q = "inf" if k["qhat"] is None else f"{k['qhat']:.4f}"
        mark = "  <- chosen" if k["kind"] == cal.score_kind else ""
        lines.append(f"{k['kind']:<13}{q:>10}{k['coverage']:>10.3f}{k['mean_set_size']:>11.2f}{k['median_set_size']:>8}{mark}")
    fk = r["fixed_top_k_at_equal_coverage"]
    lines.append(f"fixed top-k reaching the same held-out coverage: k = {'n/a' if fk is None else int(fk)}")
    lines.extend(f"note: {n}" for n in r["notes"])
    return "\n".join(lines)
