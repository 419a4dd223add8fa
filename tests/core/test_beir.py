"""ragsieve.tools.datasets.beir: the BEIR readers shared by eval, calibrate and the benchmarks."""

from __future__ import annotations

import json

import pytest

from ragsieve.agent.errors import UsageError
from ragsieve.tools.datasets.beir import read_jsonl, read_qrels, read_queries


def test_read_qrels_header_blank_lines_and_grades(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n\nq1\td2\t0\nq2\td3\t2.5\r\n", encoding="utf-8")
    assert read_qrels(path) == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2.5}}
    assert isinstance(read_qrels(path)["q1"]["d1"], int)
    path.write_text("q1\td1\t1\n", encoding="utf-8")  # no header
    assert read_qrels(path) == {"q1": {"d1": 1}}


@pytest.mark.parametrize(
    "body, message",
    [
        ("query-id\tcorpus-id\tscore\nq1\td1\n", ":2: expected"),
        ("q1\td1\t1\nq2\td2\thigh\n", ":2: score 'high' is not a number"),
    ],
)
def test_read_qrels_refuses_malformed_lines_with_their_number(tmp_path, body, message):
    path = tmp_path / "bad.tsv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        read_qrels(path)


def test_read_queries_and_jsonl(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"_id": 7, "text": "what?"}) + "\n\n" + json.dumps({"_id": "b", "text": "why?"}), encoding="utf-8")
    assert read_queries(path) == {"7": "what?", "b": "why?"}
    path.write_text('{"_id": "a"}\n', encoding="utf-8")
    with pytest.raises(UsageError, match="not a BEIR query"):
        read_queries(path)
    path.write_text('{"_id": "a", "text": "x"}\nnot json\n', encoding="utf-8")
    with pytest.raises(UsageError, match=":2: not JSON"):
        read_jsonl(path)
    path.write_bytes(b"\xff\xfe bad utf-8")
    with pytest.raises(UsageError, match="cannot read"):
        read_jsonl(path)
    with pytest.raises(UsageError, match="cannot read"):
        read_qrels(tmp_path / "missing.tsv")
