"""The filter sections: `[conformal]`, `[abstention]`, `[outliers]` (GMM) and `[segments]` (RSE)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragsieve.agent.config.base import _Section


class ConformalConfig(_Section):
    """Conformal threshold step (needs `ragsieve calibrate`; without a calibration it passes through)."""

    enabled: bool = True
    min_keep: int = Field(0, ge=0)  # when nothing passes, keep this many best chunks (0: say there is no evidence)
    alpha: float | None = Field(None, gt=0.0, lt=1.0)  # None: the calibrated alpha; else q is recomputed
    score_kind: Literal["raw", "gap", "ratio", "rank", "hybrid-rank", "hybrid-ratio"] | None = (
        None  # None: the kind chosen by calibrate
    )
    # pool: keep every passing pool chunk; corpus: also passing chunks beyond the pool (CONFLARE's threshold
    # retrieval over the index, the best `corpus_max` by similarity); context: narrow the context only
    candidates: Literal["context", "pool", "corpus"] = "corpus"
    corpus_max: int = Field(100, ge=1, le=10000)


class AbstentionConfig(_Section):
    """Calibrated abstention (ragsieve.tools.filters.abstention, needs `ragsieve calibrate`): the model's
    abstention stands unless the calibrated answerability score says answerable at this false-answer rate."""

    max_false_answer: float = Field(0.02, gt=0.0, lt=1.0)  # P(overruling an abstention on an unanswerable question)
    overrule: Literal["passages", "never"] = "passages"  # passages: reply with the passages, labelled as such
    passages: int = Field(3, ge=0, le=20)  # closest passages listed under an abstention, marked as not an answer
    # the reply's sources also list the context's top N passages the answer did not cite, marked as retrieved and
    # not cited (agent/answer/also_retrieved.py): the sources then hold the top passages whatever a weak model cites
    # (under an abstention only when `passages` > 0)
    also_retrieved: int = Field(5, ge=0, le=20)
    # an answer that cites none of the passages (agent/answer/grounding.py) is replaced by the abstention with the closest
    # passages; off by default (the answer is then marked `grounding: none`); the widget asks for it by default
    strict: bool = False


class OutlierConfig(_Section):
    """GMM outlier filter (Bulgakov 2024); settings are the paper's. Off by default: measured after the conformal
    step on HotpotQA it changed nothing with the oracle judge and lowered gold recall with noisy ones
    (flip10 0.879 -> 0.864, flip25 0.908 -> 0.879; benchmarks/results/pipeline-gmm-stage.json). `standardize` (eq. 9)
    stays off: Table 1 at n = 60 per question type showed no gain from it (benchmarks/results/filters-gmm*.json)."""

    enabled: bool = False
    method: Literal["concatenate", "weighted_sum", "interaction", "polynomial"] = "interaction"
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    degree: int = Field(2, ge=1, le=6)
    pca_dims: list[int] = Field(default_factory=lambda: [2, 3], min_length=1)
    n_components: list[int] = Field(default_factory=lambda: [4, 5, 6], min_length=1)
    percentile: float = Field(15.0, gt=0.0, lt=100.0)
    min_outlier_freq: int = Field(4, ge=1)  # the paper's better setting: flagged in >= 4 of the K x PCA runs
    standardize: bool = False  # standardise features before PCA (makes alpha a no-op except for weighted_sum)
    seed: int = 0
    fit_candidates: int = Field(20, ge=1)  # the GMM is fitted on the context plus the best pool chunks up to this many
    # never flag the best N: from the authors' public code for arXiv:2407.01403 (its run script's
    # `excluded_outlier_idxs = [0, 1, 2, 3]`), not in the paper, which flags every candidate; measured without it,
    # a top-4 chunk was flagged in 5 of 8 trial questions (issue 23)
    protect_top: int = Field(4, ge=0)
    plot: str | None = None  # write the paper's Figure-2 style PNG here


class SegmentConfig(_Section):
    """Relevant segment extraction (dsRAG RSE); None fields take the preset's value."""

    enabled: bool = True
    preset: Literal["default", "balanced", "precision", "find_all"] = "default"
    max_length: int | None = Field(None, ge=1)
    overall_max_length: int | None = Field(None, ge=1)
    minimum_value: float | None = None
    irrelevant_chunk_penalty: float | None = Field(None, ge=0.0)
    decay_rate: float | None = Field(None, gt=0.0)
    relevance: Literal["auto", "calibrated", "cosine"] = "auto"  # auto: calibrated when calibration.json exists
    cosine_low: float = Field(0.1, ge=-1.0, le=1.0)
    cosine_high: float = Field(0.7, ge=-1.0, le=1.0)
    chunk_length_adjustment: bool = True  # dsRAG: value * max(chars, 700) / 700
    # keep context chunks with evidence (conformal set, trusted judge, fallback) outside every segment;
    # false: dsRAG alone decides (measured: costs 5-11 points of HotpotQA gold recall with noisy judges,
    # benchmarks/results/pipeline-rse-dsrag-only.json)
    keep_evidence: bool = True
    merge: bool = True  # one passage per segment (text rebuilt from the chunk store) or one per chunk
