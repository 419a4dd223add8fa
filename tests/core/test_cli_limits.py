"""Issue 10 through the command line: options range-checked as in the config, hostile replies
cleaned before the terminal, skipped paths listed, secrets masked, malformed eval data refused."""

from __future__ import annotations

import json
import os

import pytest

from ragsieve.agent.errors import UsageError
from ragsieve.cli.main import main
from ragsieve.eval.data import load_dataset
from tests.support.stub_openai import StubOpenAI, StubReply, error_body, ok


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("ragsieve: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("value", ["0", "1", "15", "100000"])
def test_chunk_tokens_outside_the_config_range_is_refused(tmp_path, capsys, value):
    (tmp_path / "a.md").write_text("# A\nalpha")
    code = main(["index", str(tmp_path / "a.md"), "--index", str(tmp_path / "idx"), "--chunk-tokens", value])
    line = _error_line(capsys.readouterr().err)
    assert code == 2 and f"--chunk-tokens {int(value)!r}" in line
    assert ("greater than or equal to 16" if int(value) < 16 else "less than or equal to 8192") in line
    assert not (tmp_path / "idx").exists()


def test_negative_lock_wait_and_deadline_are_refused(tmp_path, capsys, examples_index):
    (tmp_path / "a.md").write_text("# A\nalpha")
    assert main(["index", str(tmp_path / "a.md"), "--index", str(tmp_path / "idx"), "--lock-wait", "-1"]) == 2
    assert "--lock-wait-s -1.0" in _error_line(capsys.readouterr().err)
    assert main(["ask", "q", "--index", str(examples_index), "--deadline", "0"]) == 2
    assert "--deadline-s 0.0" in _error_line(capsys.readouterr().err)


def test_index_lists_each_problem_path(tmp_path, capsys, embedder, monkeypatch):
    import ragsieve.tools.index.building.builder as ib

    monkeypatch.setattr(ib.IndexBuilder, "_embedder_for", lambda self: embedder)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "ok.md").write_text("# Ok\nfine text")
    os.symlink("loop.md", corpus / "loop.md")
    os.mkfifo(corpus / "pipe.md")
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "problems: 1 unreadable, 1 special" in out
    assert "skipped " in out and "loop.md: symlink loop or broken symlink" in out and "pipe.md: special file (FIFO)" in out


def test_hostile_reply_is_cleaned_before_the_terminal(examples_index, tmp_path, capsys):
    hostile = "Rotate it\x1b[2J\x1b]0;owned\x07 with lumen [1].\x9b1m"
    with StubOpenAI([ok(hostile)]) as stub:
        assert main(["ask", "how to rotate keys", "--index", str(examples_index), "--base-url", stub.base_url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Rotate it with lumen [1].") and "\x1b" not in out and "\x9b" not in out
    with StubOpenAI([ok(hostile)]) as stub:
        assert main(["ask", "how to rotate keys", "--index", str(examples_index), "--base-url", stub.base_url, "--json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and json.loads(out)["answer"].startswith("Rotate it\x1b[2J")


def test_password_in_base_url_never_printed(examples_index, tmp_path, capsys):
    replies = [StubReply(500, {"error": {"message": "down"}})] * 2
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_attempts = 2\nmax_retry_s = 2.0\n")
    with StubOpenAI(replies) as stub:
        url = stub.base_url.replace("http://", "http://alice:s3cretpw@")
        code = main(["-v", "ask", "q", "--index", str(examples_index), "--config", str(config), "--base-url", url])
    err = capsys.readouterr().err
    assert code == 2 and "s3cretpw" not in err and "alice:***@" in _error_line(err)


def _dataset(tmp_path, qrels: str, qa: list[dict] | None = None):
    root = tmp_path / "ds"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "t", "text": "x"}) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what?"}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    if qa is not None:
        (root / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa))
    return root


@pytest.mark.parametrize("grade", ["nan", "inf", "-inf"])
def test_non_finite_grade_is_refused_in_one_line(tmp_path, grade):
    with pytest.raises(UsageError, match=f"test.tsv:2: score '{grade}' is not a finite number"):
        load_dataset(_dataset(tmp_path, f"q1\td1\t{grade}\n"))


def test_answers_as_a_string_is_refused(tmp_path):
    root = _dataset(tmp_path, "q1\td1\t1\n", [{"id": "q1", "question": "what?", "answers": "forty two"}])
    with pytest.raises(UsageError, match="'answers' must be a list of strings") as caught:
        load_dataset(root)
    assert "\n" not in str(caught.value)
    root = _dataset(tmp_path / "ok", "q1\td1\t1\n", [{"id": "q1", "question": "what?", "answers": ["forty two"]}])
    assert load_dataset(root).questions[0].answers == ["forty two"]


def test_hanging_endpoint_is_cut_by_the_question_deadline(examples_index, capsys):
    import time

    from ragsieve.agent.answer.also_retrieved import STOPPED

    with StubOpenAI([StubReply(200, {"choices": []}, delay_s=30)]) as stub:
        started = time.monotonic()
        code = main(
            [
                "ask",
                "how to rotate keys",
                "--index",
                str(examples_index),
                "--base-url",
                stub.base_url,
                "--deadline",
                "1",
                "--json",
            ]
        )
        elapsed = time.monotonic() - started
    assert code == 3 and elapsed < 10  # no answer: a failure for scripts (issue 22), the JSON still printed
    out = json.loads(capsys.readouterr().out)
    assert out["stopped"].startswith("budget: deadline") and out["trace"][-1]["outcome"] == "stopped"
    assert out["answer"].startswith(STOPPED) and out["citations"]  # never empty-handed: the closest passages


def test_ask_json_prints_json_whatever_ends_it(examples_index, tmp_path, capsys):
    """A failure under `--json` is one JSON object on stdout too (a missing index, a refusing endpoint)."""
    assert main(["ask", "how to rotate keys", "--index", str(tmp_path / "none"), "--json"]) == 2
    missing = json.loads(capsys.readouterr().out)
    assert set(missing) == {"error"} and missing["error"]["message"] and missing["error"]["type"]
    with StubOpenAI([StubReply(status=400, body=error_body("no such model"))] * 4) as stub:
        code = main(
            ["ask", "how to rotate keys", "--index", str(examples_index), "--base-url", stub.base_url, "--model", "m", "--json"]
        )
    refused = json.loads(capsys.readouterr().out)
    assert code == 2 and "no such model" in refused["error"]["message"]
