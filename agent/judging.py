"""Listwise JSON relevance judging, and how judgments are combined with retrieval.

Judging (semi-supervised retrieval, Minnaar 2023)
    Candidates are split into batches of at most `loop.judge_batch_size`
    chunks and `loop.judge_batch_chars` characters of chunk text (each chunk
    cut to `loop.judge_chunk_chars`). Each batch is one `judge.j2` prompt
    holding `{index: text}` (indexes 1..b of that batch) and the question; the
    reply must match a pydantic model built for exactly those indexes:
    required boolean fields, extra keys forbidden. Batches run concurrently on
    a ThreadPoolExecutor of `loop.judge_concurrency` workers.

Failure fallback
    When a batch fails (`StructuredOutputError` after the LLM's one re-ask, a
    refusal, or `EndpointError` after the client's retries: any `LLMError`),
    its chunks get no verdict and are decided by retrieval score like an
    uninformative round (below). The error is recorded in the round report;
    nothing is re-asked beyond the LLM's own re-ask, so a round costs at most
    two calls per batch.

A judge that knows when it is no judge
    Each round hides `loop.judge_decoys` control chunks among the candidates
    (at seeded random positions): the chunks whose embeddings are least
    similar to the question's, i.e. certainly irrelevant (the "gold question"
    / honeypot check of crowdsourcing quality control; Oleson et al. 2011,
    "Programmatic gold"). Decoy verdicts are never recorded as judgments.
    A round's verdicts are *uninformative* when
    (0) the judge calls any decoy relevant (a judge answering at random with
        rate p passes d decoys with probability (1-p)^d per round); or
    (a) at least `loop.uninformative_min_n` chunks were judged and every one
        came back true, or every one false in the first round (the first
        round's candidates are retrieval's best, so "nothing is relevant" is
        not believable there; in later rounds all-false just means nothing
        new was found); or
    (b) the judge disagrees with retrieval far beyond chance: the chunks it
        calls relevant sit so low in the retrieval ranking that the exact
        one-sided rank-sum test (Wilcoxon 1945; Mann & Whitney 1947) gives
        p <= `loop.disagreement_alpha` under the null hypothesis that the
        verdicts are unrelated to the ranking.
    Such a round (and a failed batch) falls back to *score-based selection*:
    a chunk counts as relevant exactly when it is in the first-stage top
    `loop.final_k`, i.e. in the context the `fast` plan would use. Verdicts
    of informative rounds are *trusted*; but a judge caught once is not
    trusted for the rest of the question: an uninformative round withdraws
    the verdicts of earlier rounds from the combination rule too (the loop
    stops there), and the fallback does not ask it again.

Combination rule (final context of `loop.final_k` chunks)
    1. trusted-relevant chunks, in retrieval-evidence order (first-stage rank;
       chunks found by expansion after those, in discovery order; a neighbour
       right after the chunk that brought it);
    2. then the fast context (first-stage top `final_k`) in rank order,
       chunks without a trusted "irrelevant" verdict first;
    3. then any other first-stage chunk without a trusted "irrelevant" verdict.
    The list is cut at `final_k`. A chunk of the fast context therefore only
    leaves when a trusted-relevant chunk takes its place (trusted-irrelevant
    ones leave first). With no trusted verdict at all (an uninformative
    judge, every batch failed) the result IS the fast context (`final_k` =
    `retrieval.top_k`, both 5 by default), so both-gold recall equals
    `fast`'s by construction; it can only drop when a judge that passed every
    check calls a gold chunk irrelevant or promotes non-gold ones.
"""
from __future__ import annotations

import hashlib
import logging
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, create_model

from agent.chat import Usage
from agent.config import LoopConfig
from agent.errors import LLMError
from tools.types import Hit

log = logging.getLogger(__name__)


# -- batching and schema --------------------------------------------------
def make_batches(hits: list[Hit], batch_size: int, max_chars: int, chunk_chars: int) -> list[list[Hit]]:
    """Greedy, order-keeping split: a batch closes at `batch_size` chunks or `max_chars` text."""
    batches: list[list[Hit]] = []
    current: list[Hit] = []
    used = 0
    for hit in hits:
        size = min(len(hit.chunk.text), chunk_chars)
        if current and (len(current) >= batch_size or used + size > max_chars):
            batches.append(current)
            current, used = [], 0
        current.append(hit)
        used += size
    if current:
        batches.append(current)
    return batches


@lru_cache(maxsize=64)
def batch_schema(n: int) -> type[BaseModel]:
    """A model with required boolean fields "1".."n" and no other keys allowed."""
    fields: dict[str, Any] = {f"i{i}": (bool, Field(..., alias=str(i))) for i in range(1, n + 1)}
    return create_model(f"Relevance{n}", __config__=ConfigDict(extra="forbid"), **fields)


def render_judge_prompt(prompts: Any, question: str, hits: list[Hit], chunk_chars: int) -> str:
    chunks = {str(i): hit.chunk.text[:chunk_chars] for i, hit in enumerate(hits, start=1)}
    return prompts.render("judge", question=question, chunks=chunks)


# -- one round ------------------------------------------------------------
@dataclass
class BatchReport:
    ids: list[str]
    verdicts: dict[str, bool] | None  # None: the batch failed
    error: str = ""

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"size": len(self.ids)}
        if self.verdicts is None:
            out["failed"] = self.error
        else:
            out["true"] = sum(self.verdicts.values())
        return out


@dataclass
class JudgeRound:
    """Verdicts of one round. `mode`: "judge" (trusted), "score" (uninformative) or "failed"."""

    batches: list[BatchReport] = field(default_factory=list)
    verdicts: dict[str, bool] = field(default_factory=dict)  # raw verdicts of successful batches
    failed: list[str] = field(default_factory=list)  # ids whose batch failed
    mode: str = "judge"
    reason: str = ""
    decoys: int = 0  # control chunks shown
    decoys_relevant: int = 0  # of those, judged relevant

    @property
    def trusted(self) -> dict[str, bool]:
        return dict(self.verdicts) if self.mode == "judge" else {}


def judge_batch(question: str, hits: list[Hit], *, llm: Any, prompts: Any, chunk_chars: int) -> BatchReport:
    ids = [h.chunk_id for h in hits]
    schema = batch_schema(len(hits))
    prompt = render_judge_prompt(prompts, question, hits, chunk_chars)
    try:
        reply = llm.structured([{"role": "user", "content": prompt}], schema, max_tokens=16 + 8 * len(hits))
    except LLMError as exc:  # malformed JSON after the re-ask, refusal, endpoint down after retries
        log.warning("judge batch of %d failed (%s): %s", len(hits), type(exc).__name__, exc)
        return BatchReport(ids, None, f"{type(exc).__name__}: {str(exc)[:300]}")
    values = reply.model_dump(by_alias=True)
    return BatchReport(ids, {cid: bool(values[str(i)]) for i, cid in enumerate(ids, start=1)})


def judge_candidates(question: str, hits: list[Hit], *, llm: Any, prompts: Any, loop: LoopConfig,
                     ranked_ids: list[str], first_round: bool, decoys: list[Hit] | None = None,
                     seed: str = "") -> JudgeRound:
    """Judge `hits` (with `decoys` hidden among them) in concurrent batches; assess the verdicts.

    `ranked_ids` are the hits that have a retrieval rank, best first (the
    disagreement test uses only those). `seed` fixes the decoy positions.
    """
    if not hits:
        return JudgeRound(mode="judge", reason="nothing to judge")
    decoys = [d for d in (decoys or []) if d.chunk_id not in {h.chunk_id for h in hits}]
    decoy_ids = {d.chunk_id for d in decoys}
    items = interleave(hits, decoys, f"{question}\n{seed}")
    batches = make_batches(items, loop.judge_batch_size, loop.judge_batch_chars, loop.judge_chunk_chars)
    workers = min(loop.judge_concurrency, len(batches))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        futures = [pool.submit(judge_batch, question, b, llm=llm, prompts=prompts,
                               chunk_chars=loop.judge_chunk_chars) for b in batches]
        reports = [f.result() for f in futures]
    result = JudgeRound(batches=reports)
    for report in reports:
        if report.verdicts is None:
            result.failed.extend(c for c in report.ids if c not in decoy_ids)
            continue
        for cid, verdict in report.verdicts.items():
            if cid in decoy_ids:
                result.decoys += 1
                result.decoys_relevant += int(verdict)
            else:
                result.verdicts[cid] = verdict
    if not result.verdicts:
        result.mode, result.reason = "failed", "every judge batch failed"
        return result
    if result.decoys_relevant:
        result.mode = "score"
        result.reason = (f"judge called {result.decoys_relevant} of {result.decoys} decoys "
                         "(chunks least similar to the question) relevant")
        return result
    informative, reason = assess_verdicts(result.verdicts, ranked_ids, first_round=first_round,
                                          min_n=loop.uninformative_min_n, alpha=loop.disagreement_alpha)
    if not informative:
        result.mode, result.reason = "score", reason
    elif result.failed:
        result.reason = f"{len(result.failed)} chunk(s) of failed batches decided by retrieval score"
    return result


# -- is the judge a judge? ------------------------------------------------
def pick_decoys(index: Any, question: str, exclude: set[str], n: int, skip: int = 0) -> list[Hit]:
    """The chunks least similar to the question (cosine of the normalised embeddings), after `skip`.

    Needs `index.vectors` and `index.embed_query`; without them there are no decoys.
    """
    vectors = getattr(index, "vectors", None)
    embed = getattr(index, "embed_query", None)
    if n <= 0 or vectors is None or embed is None or len(vectors) == 0:
        return []
    query = np.asarray(embed(question), dtype=np.float32).reshape(-1)
    sims = np.asarray(vectors, dtype=np.float32) @ query
    rows: list[int] = []
    for row in np.argsort(sims, kind="stable").tolist():
        if len(rows) == n + skip:
            break
        rows.append(row)
    rows = rows[skip:]
    chunks = index.store.get_many(rows)
    return [Hit(chunk=c, row=r, score=0.0, dense_score=float(sims[r]), extra={"decoy": 1.0})
            for c, r in zip(chunks, rows) if c.chunk_id not in exclude]


def interleave(hits: list[Hit], decoys: list[Hit], seed: str) -> list[Hit]:
    """`hits` in order with `decoys` inserted at positions drawn from a generator seeded by `seed`."""
    if not decoys:
        return list(hits)
    rng = random.Random(int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big"))
    total = len(hits) + len(decoys)
    slots = set(rng.sample(range(total), len(decoys)))
    out: list[Hit] = []
    h, d = iter(hits), iter(decoys)
    for i in range(total):
        out.append(next(d) if i in slots else next(h))
    return out


def rank_sum_pvalue(positive_ranks: list[int], n: int) -> float:
    """Exact one-sided p-value P(W >= w) of the rank sum of k "positive" items among ranks 1..n.

    Under H0 the k positives are a uniformly random k-subset of {1..n}
    (Wilcoxon 1945, "Individual comparisons by ranking methods"; Mann &
    Whitney 1947). Subsets are counted by dynamic programming:
    c[j][s] = number of j-subsets of the ranks seen so far summing to s.
    A large W means the positives are the worst-ranked items.
    """
    k = len(positive_ranks)
    if k == 0 or k == n:
        return 1.0
    w = sum(positive_ranks)
    max_sum = sum(range(n - k + 1, n + 1))
    counts = [[0] * (max_sum + 1) for _ in range(k + 1)]
    counts[0][0] = 1
    for r in range(1, n + 1):
        for j in range(min(k, r), 0, -1):
            row, prev = counts[j], counts[j - 1]
            for s in range(max_sum, r - 1, -1):
                if prev[s - r]:
                    row[s] += prev[s - r]
    total = sum(counts[k])
    return sum(counts[k][w:]) / total


def assess_verdicts(verdicts: dict[str, bool], ranked_ids: list[str], *, first_round: bool,
                    min_n: int, alpha: float) -> tuple[bool, str]:
    """(informative?, reason) for one round's verdicts (rules (a) and (b) of the module docstring)."""
    n = len(verdicts)
    n_true = sum(verdicts.values())
    if n >= min_n and n_true == n:
        return False, f"all {n} chunks judged relevant"
    if n >= min_n and n_true == 0 and first_round:
        return False, f"all {n} first-stage chunks judged irrelevant"
    ranked = [cid for cid in ranked_ids if cid in verdicts]
    positives = [i for i, cid in enumerate(ranked, start=1) if verdicts[cid]]
    if 0 < len(positives) < len(ranked):
        p = rank_sum_pvalue(positives, len(ranked))
        if p <= alpha:
            return False, (f"judge disagrees with retrieval beyond chance: relevant ranks {positives} "
                           f"of {len(ranked)}, rank-sum p={p:.3f} <= {alpha}")
    return True, ""


def score_based_relevant(ids: list[str], first_stage: list[str], final_k: int) -> list[str]:
    """The score-based decision: relevant iff in the first-stage top `final_k`."""
    top = set(first_stage[:final_k])
    return [cid for cid in ids if cid in top]


# -- combining judgments with retrieval -----------------------------------
def evidence_keys(first_stage: list[str], discovered: list[str],
                  neighbour_of: dict[str, str]) -> dict[str, float]:
    """Retrieval-evidence position of every known chunk (smaller is better)."""
    keys: dict[str, float] = {}
    for i, cid in enumerate(first_stage):
        keys.setdefault(cid, float(i))
    offset = float(len(first_stage))
    for i, cid in enumerate(discovered):
        if cid not in keys and cid not in neighbour_of:
            keys[cid] = offset + i
    for j, (cid, parent) in enumerate(neighbour_of.items()):
        if cid not in keys:
            keys[cid] = keys.get(parent, offset + len(discovered)) + 0.5 + j * 1e-6
    return keys


def select_context(first_stage: list[str], keys: dict[str, float], trusted: dict[str, bool],
                   final_k: int) -> tuple[list[str], dict[str, Any]]:
    """The combination rule of the module docstring; returns chunk ids and a trace summary."""
    positives = sorted((c for c, v in trusted.items() if v), key=lambda c: keys.get(c, float("inf")))
    fast = first_stage[:final_k]
    ordered = positives + [c for c in fast if trusted.get(c) is not False] + \
        [c for c in fast if trusted.get(c) is False] + \
        [c for c in first_stage[final_k:] if trusted.get(c) is not False]
    chosen: list[str] = []
    for cid in ordered:
        if cid not in chosen:
            chosen.append(cid)
        if len(chosen) == final_k:
            break
    summary = {
        "trusted_relevant": len(positives),
        "kept_from_fast": sum(1 for c in chosen if c in fast),
        "promoted": [c for c in chosen if c not in fast],
        "displaced": [c for c in fast if c not in chosen],
        "same_as_fast": chosen == fast,
    }
    return chosen, summary


def budget_reason(usage: Usage, loop: LoopConfig) -> str | None:
    """Why the LLM budget is spent, or None."""
    if usage.calls >= loop.max_llm_calls:
        return f"LLM-call budget reached ({usage.calls} >= {loop.max_llm_calls})"
    tokens = usage.prompt_tokens + usage.completion_tokens
    if tokens >= loop.max_total_tokens:
        return f"token budget reached ({tokens} >= {loop.max_total_tokens})"
    return None
