"""Checks that a relevance judge is a judge (see `ragsieve.agent.judging.rounds` for how a round uses them).

Decoys: the chunks least similar to the question are hidden among the
candidates; a judge calling one relevant is not judging ("programmatic gold",
Oleson et al. 2011). Uniform verdicts and verdicts disagreeing with retrieval
beyond chance (exact rank-sum test) are uninformative. Order consistency: the
same candidates judged again in reversed order must get (nearly) the same
verdicts; listwise LLM judgments that change with the order are position bias,
not relevance (Zheng et al. 2023, "Judging LLM-as-a-Judge", the swap test;
Tang et al. 2023, "Found in the Middle: Permutation Self-Consistency").
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import numpy as np

from ragsieve.tools.index.backend import IndexBackend
from ragsieve.tools.types import Hit


def pick_decoys(
    index: IndexBackend | None,
    question: str,
    exclude: set[str],
    n: int,
    skip: int = 0,
    admit: Callable[[list[int]], list[int]] | None = None,
) -> list[Hit]:
    """The chunks least similar to the question (cosine of the normalised embeddings), after `skip`;
    with `admit` (the retriever's filter: metadata, the caller's access) only rows it admits.

    Needs the index's vectors; without them (or without an index) there are no decoys.
    """
    vectors = index.vectors if index is not None else None
    if index is None or n <= 0 or vectors is None or len(vectors) == 0:
        return []
    query = np.asarray(index.embed_query(question), dtype=np.float32).reshape(-1)
    sims = np.asarray(vectors, dtype=np.float32) @ query
    rows: list[int] = []
    order = np.argsort(sims, kind="stable").tolist()
    for row in admit(order) if admit is not None else order:
        if len(rows) == n + skip:
            break
        rows.append(row)
    rows = rows[skip:]
    chunks = index.store.get_many(rows)
    return [
        Hit(chunk=c, row=r, score=0.0, dense_score=float(sims[r]), extra={"decoy": 1.0})
        for c, r in zip(chunks, rows)
        if c.chunk_id not in exclude
    ]


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


def assess_verdicts(
    verdicts: dict[str, bool], ranked_ids: list[str], *, first_round: bool, min_n: int, alpha: float, decoys_shown: int = 0
) -> tuple[bool, str]:
    """(informative?, reason) for one round's verdicts (rules (a) and (b) of `ragsieve.agent.judging.rounds`).

    "Nothing is relevant" in the first round is believed only from a judge that was shown decoys
    (`decoys_shown` > 0, none called relevant: the caller checks that first): a judge that rejects the
    controls and retrieval's best alike says the question has no answer here, which is a signal for
    calibrated abstention, not a reason to distrust it. Without decoys it is uninformative, as before.
    """
    n = len(verdicts)
    n_true = sum(verdicts.values())
    if n >= min_n and n_true == n:
        return False, f"all {n} chunks judged relevant"
    if n >= min_n and n_true == 0 and first_round and decoys_shown <= 0:
        return False, f"all {n} first-stage chunks judged irrelevant (no decoys were shown to check the judge)"
    ranked = [cid for cid in ranked_ids if cid in verdicts]
    positives = [i for i, cid in enumerate(ranked, start=1) if verdicts[cid]]
    if 0 < len(positives) < len(ranked):
        p = rank_sum_pvalue(positives, len(ranked))
        if p <= alpha:
            return False, (
                f"judge disagrees with retrieval beyond chance: relevant ranks {positives} "
                f"of {len(ranked)}, rank-sum p={p:.3f} <= {alpha}"
            )
    return True, ""


def order_agreement(first: dict[str, bool], second: dict[str, bool]) -> tuple[dict[str, bool], list[str]]:
    """(verdicts both passes agree on, ids whose verdict changed with the order)."""
    agreed = {cid: v for cid, v in first.items() if cid in second and second[cid] == v}
    flipped = [cid for cid, v in first.items() if cid in second and second[cid] != v]
    return agreed, flipped
