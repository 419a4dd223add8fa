"""The default first stage uses the fusion settings chosen on SciFact's train claims (issue 60), and the result file
that chose them says so: a default changed without a measurement, or a measurement that chose otherwise, fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsieve.agent.config import Config
from ragsieve.tools.index.query.fusion import weighted_fusion

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_the_default_retrieval_is_weighted_fusion_with_the_train_chosen_weights():
    r = Config().retrieval
    assert (r.fusion, r.bm25_weight, r.dense_weight, r.candidate_k) == ("weighted", 0.6, 0.4, 100)


def test_the_orchestrators_retriever_gets_the_default_weights():
    from ragsieve.agent.orchestrator import build_retriever

    class Index:  # what the constructor reads of an index: nothing but its type
        pass

    retriever = build_retriever(Index(), Config())
    assert retriever.weights == (0.6, 0.4) and retriever.fusion.value == "weighted"


def test_the_result_file_chose_the_default_share_on_train_data():
    data = json.loads((RESULTS / "retrieval_methods.json").read_text(encoding="utf-8"))
    assert "train" in data["chosen_on"] and data["queries"] == {"train": 809, "test": 300}
    chosen = data["families"]["weights"]["chosen"]
    r = Config().retrieval
    assert chosen["settings"]["w"] == pytest.approx(r.dense_weight / (r.bm25_weight + r.dense_weight))
    assert all(chosen["train"]["ndcg@10"] >= row["train"]["ndcg@10"] for row in data["families"]["weights"]["candidates"])
    # no other method was kept, so none is on by default
    assert [f for f, v in data["families"].items() if v["kept"] and f != "weights"] == []
    # the multi-view vector is judged by its encoder work too: off while it does more than the floor allows
    views = data["families"]["dense_multi_view"]
    assert (
        views["encoder_work"] > views["max_encoder_work"] or not views["chosen"]["train"]["ndcg@10"] > chosen["train"]["ndcg@10"]
    )


def test_weighted_fusion_with_unequal_weights_matches_a_hand_computation():
    bm25 = {"a": 10.0, "b": 6.0, "c": 2.0}  # min-max: a 1, b 0.5, c 0
    dense = {"b": 0.9, "c": 0.8, "d": 0.5}  # min-max: b 1, c 0.75, d 0
    fused = dict(weighted_fusion([bm25, dense], [0.6, 0.4]))
    expected = {"a": 0.6, "b": 0.6 * 0.5 + 0.4, "c": 0.4 * 0.75, "d": 0.0}
    assert fused == pytest.approx(expected)
    assert [k for k, _ in weighted_fusion([bm25, dense], [0.6, 0.4])][:2] == ["b", "a"]
    assert dict(weighted_fusion([bm25, dense], [1.5, 1.0])) == pytest.approx(expected)  # scale-free: 1.5/1 == 0.6/0.4
