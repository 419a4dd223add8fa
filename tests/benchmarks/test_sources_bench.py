"""The code part of `benchmarks/sources/main.py` runs end to end on two real stdlib modules (docstrings blanked, a
real index, the MiniLM encoder) and reports what the issue asks: recall in each configuration, what the answer
reads, identifier queries, the README question; and the targets are read from those figures."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from benchmarks.sources import main as sources  # noqa: E402
from benchmarks.sources.code import code_benchmark  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def test_code_benchmark_on_two_modules(tmp_path, embedder):
    out = code_benchmark(tmp_path, STDLIB, ["textwrap.py", "calendar.py"], embedder, 8)
    assert out["queries"] >= 20 and out["chunks"] > 20
    for label in ("symbols_on", "symbols_off", "collapse_off"):
        row = out[label]
        assert row["n"] == out["queries"]
        assert 0.0 <= row["recall@1"] <= row["recall@5"] <= row["recall@10"] <= 1.0
        assert row["identifier_queries"] == 8
        assert 0 < row["top5_after_stitching"]["passages_mean"] <= 5
    # one hit per definition: the stitched top 5 never holds fewer passages than with every piece in its place
    assert out["symbols_on"]["top5_after_stitching"]["passages_mean"] == 5.0
    assert (
        out["symbols_on"]["top5_after_stitching"]["passages_mean"] >= out["collapse_off"]["top5_after_stitching"]["passages_mean"]
    )
    assert out["symbols_on"]["identifier_rank1_rate"] >= out["symbols_off"]["identifier_rank1_rate"]
    assert out["readme_question"]["rank"] is not None and out["readme_question"]["rank"] <= 5
    targets = sources.targets({"code": out})
    assert targets["code_recall@5_ge_0.70"] is (out["symbols_on"]["recall@5"] >= 0.70)
    assert targets["readme_question_in_top5"] is True and targets["api_anchor_precision_ge_0.90"] is None
