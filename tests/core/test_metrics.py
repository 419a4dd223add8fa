"""tools.metrics against hand-computed values (and numpy for percentiles)."""

import math

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.metrics import (
    chunk_doc_id,
    dcg_at_k,
    docs_from_chunks,
    exact_match,
    gold_passage_recall,
    is_abstention,
    mean,
    ndcg_at_k,
    normalize_answer,
    p50_p95,
    percentile,
    rank_by_score,
    recall_at_k,
    reciprocal_rank,
    strip_citations,
    token_f1,
)


def test_ndcg_graded_relevance_by_hand():
    # gains at ranks 1..4: 1, 0, 2, 0 -> DCG = 1/log2(2) + 2/log2(4) = 2
    # ideal gains 2, 2, 1 -> IDCG = 2 + 2/log2(3) + 1/log2(4)
    qrels = {"a": 1, "c": 2, "e": 2}
    idcg = 2 + 2 / math.log2(3) + 0.5
    assert ndcg_at_k(["a", "b", "c", "d"], qrels, 10) == pytest.approx(2 / idcg)
    assert ndcg_at_k(["e", "c", "a"], qrels, 10) == pytest.approx(1.0)


def test_ndcg_fewer_relevant_than_k_uses_short_ideal():
    # one relevant doc at rank 2: DCG = 1/log2(3), IDCG = 1 (not a 10-long ideal list)
    assert ndcg_at_k(["x", "a"], {"a": 1}, 10) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(["a"], {"a": 1}, 10) == 1.0


def test_ndcg_cutoff_and_no_relevant():
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 3) == pytest.approx(0.5)
    assert ndcg_at_k(["a", "b"], {}, 10) == 0.0
    assert ndcg_at_k(["a", "b"], {"a": 0, "b": -1}, 10) == 0.0


def test_ties_broken_by_id_descending_like_trec_eval():
    scores = {"a": 0.5, "b": 0.5, "c": 0.9}
    assert rank_by_score(scores) == ["c", "b", "a"]
    # same answer whatever the insertion order of the dict
    assert rank_by_score(dict(reversed(list(scores.items())))) == ["c", "b", "a"]
    # relevant "a" loses the tie to "b": rank 3 -> 1/log2(4)
    assert ndcg_at_k(rank_by_score(scores), {"a": 1}, 10) == pytest.approx(0.5)


def test_duplicates_count_at_first_position():
    assert ndcg_at_k(["a", "a", "b"], {"b": 1}, 10) == pytest.approx(1 / math.log2(3))
    assert docs_from_chunks(["d1#0", "d2#3", "d1#1", "x#y#2"]) == ["d1", "d2", "x#y"]
    assert chunk_doc_id("plain") == "plain"


def test_dcg_brute_force():
    gains = [3, 2, 3, 0, 1, 2]
    expected = sum(g / math.log2(i + 1) for i, g in enumerate(gains, start=1))
    assert dcg_at_k(gains) == pytest.approx(expected)
    assert dcg_at_k(gains, 2) == pytest.approx(3 + 2 / math.log2(3))
    with pytest.raises(UsageError, match="k=0"):
        dcg_at_k(gains, 0)


def test_recall_and_mrr():
    qrels = {"a": 1, "c": 1, "d": 1, "e": 0}
    assert recall_at_k(["a", "b", "c"], qrels, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "b", "c", "e"], qrels, 10) == pytest.approx(2 / 3)
    assert recall_at_k(["a"], {}, 10) == 0.0
    assert reciprocal_rank(["x", "y", "c"], {"c": 1}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y", "c"], {"c": 1}, k=2) == 0.0
    assert reciprocal_rank(["x", "e"], {"e": 0}) == 0.0


def test_gold_passage_recall():
    assert gold_passage_recall(["a", "b"], ["a", "c"]) == (False, 0.5)
    assert gold_passage_recall(["c", "a", "b"], ["a", "c"]) == (True, 1.0)
    assert gold_passage_recall(["a"], []) == (True, 1.0)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("A.B.C.", "abc"),
        ("Theatre of the Absurd", "theatre of absurd"),  # 'the' only as a whole word
        ("  \t\n ", ""),
    ],
)
def test_squad_normalisation(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_official_cases():
    assert exact_match("the Eiffel Tower.", ["Eiffel Tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("Rollo", ["Hrolf", "rollo"]) == 1.0  # max over gold answers
    # pred tokens {cat, sat, on, mat}, gold {cat, on, mat}: P=3/4, R=1
    assert token_f1("the cat sat on the mat", ["cat on a mat"]) == pytest.approx(2 * 0.75 / 1.75)
    assert token_f1("10th century", ["10th and 11th centuries", "the 10th century"]) == 1.0
    assert token_f1("", ["France"]) == 0.0
    assert exact_match("", ["France"]) == 0.0
    # SQuAD 2.0 no-answer: empty gold list only matches an empty prediction
    assert token_f1("", []) == 1.0 and exact_match("", []) == 1.0
    assert token_f1("France", []) == 0.0
    # repeated tokens count as a multiset
    assert token_f1("a b b", ["b b c"]) == pytest.approx(2 * (2 / 2) * (2 / 3) / (1 + 2 / 3))


def test_strip_citations():
    assert strip_citations("It is France [1][2].") == "It is France."
    assert normalize_answer(strip_citations("France [1].")) == "france"


@pytest.mark.parametrize(
    "text",
    [
        "The context does not contain the answer.",
        "the context does not contain the answer",
        "The context doesn't contain the answer.",
        "The passages do not mention who the Norse leader was.",
        "This information is not provided in the given context.",
        "The answer is not stated in the provided passages [1].",
        "I cannot answer this question from the context.",
        "There is no information about the duke in the context.",
        "The provided documents contain no answer to this question.",
        "I don't know.",
        "Not enough information to answer.",
        "The answer is not provided.",
        "I'm sorry, but the context does not provide information about the population in 2050.",
    ],
)
def test_abstention_variants(text):
    assert is_abstention(text)


def test_abstention_matches_the_answer_prompt_sentence():
    from ragsieve.agent.answer.answering import ABSTAIN

    assert is_abstention(ABSTAIN) and is_abstention(ABSTAIN.upper()) and is_abstention(ABSTAIN + " [1]")


def test_the_no_evidence_reply_counts_as_an_abstention():
    from ragsieve.agent.answer.answering import NO_EVIDENCE

    assert is_abstention(NO_EVIDENCE)  # the answer step's reply when no passage passed the filters
    assert not is_abstention("No passage of the treaty was found invalid, and the answer is yes [1].")


@pytest.mark.parametrize(
    "text",
    [
        "France [1].",
        "The Normans lived in Normandy in the 10th and 11th centuries [1].",
        "No, the treaty was not signed in 1950 [2].",
        "Rollo did not contain his ambitions and took Rouen [1].",
        "",
    ],
)
def test_not_abstention(text):
    assert not is_abstention(text)


def test_percentiles_match_numpy():
    values = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 7.5]
    for q in (0, 50, 95, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert p50_p95([1, 2, 3, 4]) == (2.5, pytest.approx(3.85))
    assert percentile([], 50) is None
    with pytest.raises(UsageError):
        percentile([1.0], 101)
    assert mean([1, None, 2]) == 1.5 and mean([None]) is None
