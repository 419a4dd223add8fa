"""docs/scaling.md's figure functions (`benchmarks/docs_figures_scaling.py`, `docs_figures_milvus.py`) render
what small synthetic result files hold, say a comparison the way the numbers go, and say so when a file is
missing. No benchmark runs here."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import docs_figures  # noqa: E402,F401  (registers every figure)
import docs_figures_scaling as sc  # noqa: E402
import docs_markers as dm  # noqa: E402


def _write(folder: Path, name: str, data: dict) -> None:
    (folder / name).write_text(json.dumps(data), encoding="utf-8")


def _int8(hybrid: float, dense: float, ratio: float, rate: float) -> dict:
    return {"chunks": 50, "chunks_per_cpu_s": rate, "hybrid_ndcg@10": 0.8 + hybrid, "dense_ndcg@10": 0.7 + dense,
            "queries": 12, "hybrid_ndcg_difference": hybrid, "dense_ndcg_difference": dense,
            "index_cpu_ratio_vs_torch": ratio, "load_average": 2.25}


def _encoder_sets(hybrid: float = -0.0012, within: bool = True) -> dict:
    torch = {"chunks": 50, "chunks_per_cpu_s": 10.05, "hybrid_ndcg@10": 0.8, "dense_ndcg@10": 0.7, "queries": 12,
             "load_average": 0.75}
    return {"commit": "abcdef0123456789", "command": "python benchmarks/scale_encoder_sets.py --work /tmp/x",
            "tolerance_ndcg@10": 0.005, "load_average_at_start": [0.31, 0.2, 0.1],
            "sets": {"hotpotqa": {"torch": torch, "onnx-int8": _int8(hybrid, 0.0, 3.125, 117.95)},
                     "squad2": {"torch": torch, "onnx-int8": _int8(-0.0003, 0.0021, 6.04, 60.7)}},
            "verdict": {"onnx-int8": {"within_tolerance_on_all": within}}}


@pytest.fixture()
def results(tmp_path: Path) -> dm.Results:
    _write(tmp_path, "scale_encoder_sets.json", _encoder_sets())
    _write(tmp_path, "eval_hotpotqa_retrieval.json", {"index": {"counts": {"documents": 40, "chunks": 50}}})
    _write(tmp_path, "eval_squad2_retrieval.json", {"index": {"counts": {"documents": 30, "chunks": 49}}})
    return dm.Results(tmp_path)


def test_rounding_is_half_up_as_written_and_differences_carry_their_sign():
    assert [dm.fixed(0.015, 2), dm.fixed(0.7145, 3), dm.fixed(28.355, 1), dm.fixed(3.1, 2)] == [
        "0.02", "0.715", "28.4", "3.10"]  # binary floats would give 0.01, 0.714
    assert [dm.signed(-0.001), dm.signed(0.0), dm.signed(0.0022)] == ["-0.0010", "0.0000", "+0.0022"]
    assert (dm.span([0.108, 1.087, 0.6]), dm.span([2.01, 1.96])) == ("0.1-1.1", "2.0")
    assert [sc.size_label(n) for n in (10_001, 100_000, 1_000_001, 999)] == ["10k", "100k", "1M", "999"]


def test_the_encoder_figures_render_the_file(results):
    assert dm.render("encoder-diffs", [], results) == "HotpotQA -0.0012 / 0.0000, SQuAD 2.0 -0.0003 / +0.0021"
    assert dm.render("encoder-speedup", [], results) == "3.1-6.0"
    assert dm.render("encoder-worst", [], results) == "HotpotQA hybrid -0.0012"
    assert dm.render("encoder-within", [], results) == "within 0.005 nDCG@10"
    assert dm.render("load", ["scale_encoder_sets.json"], results) == "0.3-2.3"  # start and each build's load
    table = dm.render("encoder-table", [], results).splitlines()
    assert table[2] == ("| HotpotQA (40 docs = 50 chunks, 12 queries) | 0.8000 / 0.7000 | 0.7988 / 0.7000 "
                        "(-0.0012 / 0.0000) | 10.1 -> 118.0 (3.13x) | commit abcdef0 |")
    assert table[3].startswith("| SQuAD 2.0 (50 chunks, 12 queries) |")  # the retrieval index had other chunks


def test_a_difference_past_the_tolerance_reads_not_within(tmp_path, results):
    _write(tmp_path, "scale_encoder_sets.json", _encoder_sets(hybrid=-0.0061, within=False))
    fresh = dm.Results(tmp_path)
    assert dm.render("encoder-within", [], fresh) == "not within 0.005 nDCG@10"
    assert dm.render("encoder-worst", [], fresh) == "HotpotQA hybrid -0.0061"


def _ray(one: float, two: float) -> dict:
    run = {"chunks": 355, "total_s": 15.0, "load_and_chunk_on_ray_s": 1.0, "steady_texts_per_s": 2 * two}
    return {"commit": "0123456789", "command": "python benchmarks/scale.py", "load_average_at_start": [0.4, 0, 0],
            "index_chunks_per_cpu_s": {"docs": 200, "rounds": 2, "default_encoder": "onnx-int8",
                                       "samples": {"torch": [{"chunks": 355}]},
                                       "chunks_per_cpu_s_median": {"onnx-int8": one, "torch": 10.0},
                                       "ratio_default_over_torch": one / 10},
            "ray": {"docs": 200, "encoder": "onnx-int8", "batch_size": 32,
                    "runs": {"1": {**run, "steady_per_actor": 2 * two}, "2": {**run, "steady_per_actor": two}}}}


def test_the_ray_figures_follow_the_rates(tmp_path, results):
    _write(tmp_path, "scale_cpu_ray.json", _ray(one=28.355, two=94.2))
    assert dm.render("index-cpu", ["rates"], dm.Results(tmp_path)) == (
        "onnx-int8 28.4 chunks per CPU-second, torch 10.0: **2.84x**")
    assert dm.render("ray-arithmetic", [], dm.Results(tmp_path)) == (
        "10 nodes x 8 cores x 94 = ~7,500 chunks/s and 10M chunks in ~0.4 h of embedding with `onnx-int8` (at "
        "the whole-build rate of ~30-120 per core-second: 2,400-9,600 chunks/s, 0.3-1.2 h)")
    assert "is lower on the SciFact abstracts above" in dm.render("ray-whole-build", [], dm.Results(tmp_path))
    _write(tmp_path, "scale_cpu_ray.json", _ray(one=28.355, two=20.0))  # both whole builds beat the actor rate
    assert dm.render("ray-whole-build", [], dm.Results(tmp_path)).startswith(
        "a whole build's CPU-time rate is higher (`onnx-int8` 28.4 chunks per CPU-second above, 118.0 on HotpotQA")


def _milvus_part(publishes: list[float], **extra: float) -> dict:
    runs = [{"publish_s": p, "rows_written": 1, "rows_retired": 1, "apply_delta_s": 0.5, "migrate_born_s": 2.25}
            for p in publishes]
    return {"runs": runs, "verified": True, "process_open_s": 0.1, "engine_open_s": 0.05, "load_collection_s": 0.9,
            "server_open_s": 1.26, "max_rss_gb": 0.35, **extra}


def test_the_milvus_table_and_phrases_render_the_file(tmp_path):
    sizes = {str(n): {"server": _milvus_part([0.095, 0.105, 0.09]), "cold": _milvus_part([0.015, 0.125, 0.02]),
                      "warm": _milvus_part([3.05, 0.025, 0.02])} for n in (1000, 20000)}
    sizes["20000"]["cold"]["engine_open_s"] = 2.1
    sizes["20000"]["cold"]["verified"] = None
    _write(tmp_path, "scale_publish_milvus.json", {"sizes": sizes, "load_average_at_start": [0.2, 0, 0]})
    results = dm.Results(tmp_path)
    table = dm.render("milvus-table", [], results).splitlines()
    assert table[2] == ("| 1,000 | 0.10, 0.11, 0.09 s | 0.05 s, then 0.02, 0.13, 0.02 s | 0.05 + 0.9 s, then 3.1 s "
                        "(born record read: 2.3 s), 0.03, 0.02 s |")
    assert table[3].startswith("| 20,000 | **0.10, 0.11, 0.09 s** | **2.10 s**, then") and "(record: 2.3 s)" in table[3]
    assert dm.render("milvus", ["open"], results) == "2.1 s at 20k"
    assert dm.render("milvus", ["publishes"], results) == "0.02-0.13 s"
    assert dm.render("milvus", ["index-cost"], results) == "2.2 s"  # process start + engine open + first publish
    assert dm.render("milvus", ["index-target"], results) == "the 2 s target is missed"
    assert dm.render("milvus", ["server-target"], results) == "under the 2 s target at 20k"
    sizes["20000"]["cold"]["engine_open_s"] = 1.5
    _write(tmp_path, "scale_publish_milvus.json", {"sizes": sizes})
    assert dm.render("milvus", ["index-target"], dm.Results(tmp_path)) == "the 2 s target is met"
    assert dm.render("milvus-checks", [], results) == (
        "Rows written / retired: 1 / 1 in every publish; readers saw each edit (checked up to 1k)")


def test_a_missing_or_short_file_says_so_instead_of_a_figure(tmp_path):
    results = dm.Results(tmp_path)
    assert dm.render("ray-per-actor", [], results) == "(not shown: `scale_cpu_ray.json` not run)"
    assert dm.render("milvus-table", [], results) == "(not shown: `scale_publish_milvus.json` not run)"
    _write(tmp_path, "retrieval_scifact.json", {"methods": {}, "index": {}})
    assert dm.render("scifact-ndcg", [], dm.Results(tmp_path)).startswith(
        "(not shown: `retrieval_scifact.json` unreadable, KeyError")
