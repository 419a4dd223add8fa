"""Evaluation metrics as pure functions: ranking (nDCG, Recall, MRR, gold-passage
recall), answers (SQuAD exact match / token F1, abstention) and percentiles.

Conventions shared by the ranking metrics:
- `ranked` is a list of ids, best first. Repeated ids count once, at their
  first position (a document reached through several chunks is ranked where
  its best chunk is: BEIR's max-pooling of passages into documents).
- `qrels` maps id -> graded relevance (int); only grades > 0 are relevant.
- Ties: a ranked list has no ties. When scores are tied, build the list with
  `rank_by_score`, which sorts by score descending, then by id descending
  (the order trec_eval, and so pytrec_eval/BEIR, uses), so results never
  depend on dict or heap order.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Iterable, Mapping, NamedTuple, Sequence

from ragsieve.tools.errors import UsageError


def _check_k(k: int | None) -> None:
    if k is not None and (not isinstance(k, int) or k < 1):
        raise UsageError(f"invalid cut-off k={k!r}: expected a positive integer or None")


def unique_in_order(ids: Iterable[str]) -> list[str]:
    """Drop repeats, keeping each id at its first (best) position."""
    seen: set[str] = set()
    out: list[str] = []
    for item in ids:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def chunk_doc_id(chunk_id: str) -> str:
    """The document id of a chunk id `doc_id#chunk_index` (the last `#` separates)."""
    head, sep, tail = chunk_id.rpartition("#")
    return head if sep and tail.isdigit() else chunk_id


def docs_from_chunks(chunk_ids: Iterable[str]) -> list[str]:
    """Document ranking from a chunk ranking: each document at its best chunk's position."""
    return unique_in_order(chunk_doc_id(c) for c in chunk_ids)


def rank_by_score(scores: Mapping[str, float]) -> list[str]:
    """Ids by score descending; ties by id descending (trec_eval's tie-break)."""
    return [i for i, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def dcg_at_k(gains: Sequence[float], k: int | None = None) -> float:
    """Discounted cumulative gain (Järvelin & Kekäläinen 2002, as in trec_eval/BEIR):
    DCG@k = sum_{i=1..k} gain_i / log2(i + 1), with linear gain = relevance grade."""
    _check_k(k)
    top = gains[:k] if k is not None else gains
    return sum(g / math.log2(i + 2) for i, g in enumerate(top) if g)


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k = DCG@k(ranking) / DCG@k(ideal) (Järvelin & Kekäläinen 2002).

    Gains are the graded relevance values of `qrels` (negative grades count 0),
    the ideal ranking sorts all judged grades descending, so a query with fewer
    relevant documents than k is normalised by its own, shorter ideal list.
    A query with no relevant document scores 0.0 (trec_eval's convention).
    """
    _check_k(k)
    ranked = unique_in_order(ranked)
    gains = [max(qrels.get(doc, 0), 0) for doc in ranked[:k]]
    ideal = sorted((max(g, 0) for g in qrels.values()), reverse=True)
    idcg = dcg_at_k(ideal, k)
    return dcg_at_k(gains, k) / idcg if idcg > 0 else 0.0


def relevant_set(qrels: Mapping[str, float]) -> set[str]:
    return {doc for doc, grade in qrels.items() if grade > 0}


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int | None = None) -> float:
    """Recall@k = |relevant ∩ top-k| / |relevant| (BEIR's definition); 0.0 without relevant docs."""
    _check_k(k)
    relevant = relevant_set(qrels)
    if not relevant:
        return 0.0
    top = unique_in_order(ranked)
    top = top[:k] if k is not None else top
    return len(relevant.intersection(top)) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], qrels: Mapping[str, float], k: int | None = None) -> float:
    """1 / rank of the first relevant id within the top k (0.0 if none); its mean
    over queries is MRR (Voorhees 1999, TREC-8 QA track)."""
    _check_k(k)
    relevant = relevant_set(qrels)
    top = unique_in_order(ranked)
    top = top[:k] if k is not None else top
    for position, doc in enumerate(top, start=1):
        if doc in relevant:
            return 1.0 / position
    return 0.0


class GoldRecall(NamedTuple):
    all_found: bool  # every gold document is in the context
    fraction: float  # share of gold documents in the context


def gold_passage_recall(context_ids: Iterable[str], gold_ids: Iterable[str]) -> GoldRecall:
    """Whether (and which share of) the gold passages reached the final context.
    No gold documents: vacuously all found, fraction 1.0."""
    gold = set(gold_ids)
    if not gold:
        return GoldRecall(True, 1.0)
    found = len(gold.intersection(context_ids))
    return GoldRecall(found == len(gold), found / len(gold))


# --- answers: the official SQuAD v1.1/v2.0 evaluation script (Rajpurkar et al. 2016, 2018) ---

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
_CITATION = re.compile(r"\s*\[\d{1,3}\](?:\s*\[\d{1,3}\])*")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles a/an/the, squeeze whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def strip_citations(text: str) -> str:
    """Remove `[n]` citation markers so they do not count as answer tokens."""
    return _CITATION.sub("", text).strip()


def exact_match(prediction: str, gold_answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer (SQuAD EM, max over golds).
    An empty gold list means "no answer": only an empty prediction matches (SQuAD 2.0)."""
    golds = list(gold_answers) or [""]
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def _f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    """SQuAD token F1 (bag of normalised tokens), max over gold answers; empty gold = "no answer"."""
    golds = list(gold_answers) or [""]
    return max(_f1(prediction, g) for g in golds)


_ABSTAIN_PATTERNS = [
    re.compile(p)
    for p in (
        r"\b(context|passages?|sources?|documents?|provided text|text)\b[^.]{0,40}\b(does|do|did) ?n[o']t\b[^.]{0,30}\b(contain|include|mention|provide|say|state|answer|specify|give|have)",
        r"\b(not|no)\b[^.]{0,20}\b(contained|mentioned|provided|stated|found|specified|given|included|available)\b[^.]{0,20}\b(in|by|from)\b[^.]{0,25}\b(context|passages?|sources?|documents?|text)",
        r"\b(context|passages?|sources?|documents?)\b[^.]{0,40}\b(contains?|has|have|provides?|gives?) no\b",
        r"\bno (information|mention|answer|relevant information)\b[^.]{0,40}\b(in|from) (the )?(context|passages?|sources?|documents?|text)",
        r"\b(cannot|can ?n[o']t|unable to) (be )?(answer|determine|find|tell)\w*\b[^.]{0,60}\b(context|passages?|sources?|documents?|information (given|provided))",
        r"^(i )?(do ?n[o']t|does ?n[o']t) know\b",
        r"^(unanswerable|not answerable|no answer)\b",
        r"^(there is )?(not enough|insufficient) information\b",
        r"\b(the )?answer (is|was) not (provided|given|stated|available|mentioned|included|found)\b",
        r"\bno (passages?|documents?|sources?)\b[^.]{0,60}\b(passed|matched|found|relevant)\b[^.]{0,60}\bno answer\b",
    )
]


def is_abstention(text: str) -> bool:
    """True when an answer declines because the context lacks the answer.

    Accepts the exact sentence the answer prompt asks for ("The context does not
    contain the answer.") and close variants ("The passages don't mention ...",
    "This is not stated in the provided context", "I cannot answer this from the
    context", "I don't know"). Citation markers and case are ignored.
    """
    if not isinstance(text, str):
        return False
    plain = " ".join(strip_citations(text).lower().replace("\u2019", "'").split())
    if not plain:
        return False
    return any(p.search(plain) for p in _ABSTAIN_PATTERNS)


# --- summaries ---


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0..100) with linear interpolation between order statistics
    (Hyndman & Fan 1996 definition 7, numpy's default); None for no values."""
    if not 0 <= q <= 100:
        raise UsageError(f"invalid percentile q={q!r}: expected 0..100")
    data = sorted(float(v) for v in values)
    if not data:
        return None
    position = (len(data) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def p50_p95(values: Sequence[float]) -> tuple[float | None, float | None]:
    return percentile(values, 50), percentile(values, 95)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-None values; None when there are none."""
    data = [float(v) for v in values if v is not None]
    return sum(data) / len(data) if data else None


# --- per-question bundles used by the evaluation harness ---


def retrieval_scores(
    first_stage_docs: Sequence[str], context_docs: Sequence[str] | None, qrels: Mapping[str, float]
) -> dict[str, float]:
    """First-stage nDCG@10, Recall@10/@100 and RR over the document ranking; with a final
    context also its nDCG@10, recall, RR and gold-passage recall. Empty without qrels."""
    if not relevant_set(qrels):
        return {}
    fs = list(first_stage_docs)
    row = {
        "fs_ndcg@10": ndcg_at_k(fs, qrels, 10),
        "fs_recall@10": recall_at_k(fs, qrels, 10),
        "fs_recall@100": recall_at_k(fs, qrels, 100),
        "fs_mrr": reciprocal_rank(fs, qrels),
    }
    if context_docs is not None:
        ctx = list(context_docs)
        gold = gold_passage_recall(ctx, relevant_set(qrels))
        row.update(
            {
                "ctx_ndcg@10": ndcg_at_k(ctx, qrels, 10),
                "ctx_recall": recall_at_k(ctx, qrels),
                "ctx_mrr": reciprocal_rank(ctx, qrels),
                "gold_all": float(gold.all_found),
                "gold_fraction": gold.fraction,
            }
        )
    return row


def answer_scores(answer: str, gold_answers: Sequence[str], impossible: bool) -> dict[str, float | bool]:
    """Answer metrics of one question, citation markers removed first.

    Answerable: SQuAD EM and F1, and whether the model wrongly abstained.
    Unanswerable (SQuAD 2.0 `is_impossible`): whether it abstained. Both: the
    SQuAD 2.0 EM/F1 where an abstention counts as the empty "no answer".
    """
    abstained = is_abstention(answer)
    text = strip_citations(answer)
    golds = [] if impossible else list(gold_answers)
    as_squad2 = "" if abstained else text
    row: dict[str, float | bool] = {
        "abstained": abstained,
        "squad2_em": exact_match(as_squad2, golds),
        "squad2_f1": token_f1(as_squad2, golds),
    }
    if impossible:
        row["abstain_correct"] = float(abstained)
    else:
        row.update({"em": exact_match(text, golds), "f1": token_f1(text, golds), "false_abstain": float(abstained)})
    return row
