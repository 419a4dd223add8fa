"""The GMM table's benchmark helpers (`benchmarks/pipeline/gmm_table.py`): eq. 15 as written, merging per-type Table-1
runs, and the question cache (pure functions, no index)."""

from __future__ import annotations

import json

import numpy as np
import pytest

VECTORS = {"good": [1.0, 0, 0, 0], "q": [1.0, 0, 0, 0], "bad": [0.6, 0.8, 0, 0], "mid": [0.8, 0.6, 0, 0]}


class _Index:
    """Chunk r points along axis r % 4; answers embed by their first word (VECTORS)."""

    def __init__(self, n=20):
        self.vectors = np.eye(4)[[r % 4 for r in range(n)]] * 0.9 + 0.1
        self.vectors /= np.linalg.norm(self.vectors, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]

    def embed(self, texts):
        return np.asarray([VECTORS["q" if t.startswith("q") else t.split()[0]] for t in texts])


class _Keep:  # keeps the rows on axis 0 (5 of 20)
    def __init__(self, *grid):
        pass

    def run(self, vectors, query):
        class R:
            counts = [int(v.argmax() != 0) for v in vectors]

        return R()

    def decide(self, counts):
        return [c >= 1 for c in counts]


def test_emb_percent_is_the_mean_of_per_question_ratios_not_a_ratio_of_sums():
    from benchmarks.pipeline import gmm_table

    class Reader:
        calls = 0

        def __call__(self, question, rows):  # filtered: "good" (cos 1); unfiltered: q1 "bad" (0.6), q2 "mid" (0.8)
            if all(r % 4 == 0 for r in rows):
                return "good"
            return "bad" if question == "q1" else "mid"

    questions = [{"type": "broader", "question": q, "truth": "good truth"} for q in ("q1", "q2")]
    row = gmm_table.table(_Index(), questions, _Keep, Reader(), nrd=20, progress=lambda m: None)["rows"][0]
    # eq. 15: mean of (1 - 0.6) / 0.6 and (1 - 0.8) / 0.8; the ratio of sums would be (2 - 1.4) / 1.4
    # (against all 20 chunks; the same holds for the headline against the same-size top-k)
    assert row["Emb%_vs_all"] == round((0.4 / 0.6 + 0.2 / 0.8) / 2 * 100, 2) == 45.83
    assert row["Emb%_vs_all_sums"] == round(0.6 / 1.4 * 100, 2) == 42.86
    assert row["n_ratio_vs_all"] == 2


def _part(kind: str, standardize: bool = False) -> dict:
    return {
        "command": f"filters.py --types {kind}",
        "commit": "abc",
        "load_average": [1.0, 1.0, 1.0],
        "elapsed_s": 5,
        "gmm": {
            "filter_defaults": {"standardize": standardize},
            "question_counts": {kind: 60},
            "types": {kind: {"extractive": {"rows": []}}},
        },
    }


def test_merge_joins_question_types_and_refuses_mixed_settings_or_a_type_twice():
    from benchmarks.pipeline import gmm_table

    merged = gmm_table.merge([_part("simple"), _part("broader")])
    assert set(merged["gmm"]["types"]) == {"simple", "broader"}
    assert merged["gmm"]["question_counts"] == {"simple": 60, "broader": 60}
    assert merged["command"] == "filters.py --types simple; filters.py --types broader" and merged["commit"] == "abc"
    with pytest.raises(ValueError, match="different filter settings"):
        gmm_table.merge([_part("simple"), _part("broader", standardize=True)])
    with pytest.raises(ValueError, match="measured twice"):
        gmm_table.merge([_part("simple"), _part("simple")])


def test_question_cache_counts_parsed_questions_of_the_same_writer_only(tmp_path):
    """filters.py starts no LLM when the cache already holds --limit questions from the configured writer."""
    from benchmarks.pipeline import gmm_table

    cache = tmp_path / "gmm_questions.json"
    assert gmm_table.cached_questions(cache, "m", 0) == 0  # no cache yet
    cache.write_text(
        json.dumps(
            {
                "model": "m",
                "seed": 0,
                "windows": [
                    {"title": "a", "question": "q1", "answer": "x"},
                    {"title": "b", "error": "bad JSON"},
                    {"title": "c", "question": "q2", "answer": "y"},
                ],
            }
        )
    )
    assert gmm_table.cached_questions(cache, "m", 0) == 2  # the unparsable window is not a question
    assert gmm_table.cached_questions(cache, "other-model", 0) == 0
    assert gmm_table.cached_questions(cache, "m", 1) == 0
