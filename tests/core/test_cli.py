"""The CLI end to end over the real openai client and a local stub server."""

import json

from ragsieve.cli.main import main
from tests.support.stub_openai import StubOpenAI, StubReply, error_body, ok


def _error_line(err: str) -> str:
    """The CLI's own error: exactly one line starting with 'ragsieve: error:'."""
    lines = [line for line in err.splitlines() if line.startswith("ragsieve: error:")]
    assert len(lines) == 1, err
    return lines[0]


def _config(tmp_path, **llm):
    lines = ["[llm]"] + [f"{k} = {json.dumps(v)}" for k, v in llm.items()]
    path = tmp_path / "ragsieve.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_ask_prints_answer_and_numbered_citations(examples_index, capsys):
    with StubOpenAI([ok("Run `lumen keys rotate` [1]; the old key keeps working for a grace period [2].")]) as stub:
        code = main(["ask", "How do I rotate the API key?", "--index", str(examples_index), "--base-url", stub.base_url])
        sent = stub.chat_requests()[0].json
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Run `lumen keys rotate` [1]")
    assert "Sources:\n  [1] " in out and "  [2] " in out
    assert "How do I rotate the API key?" in sent["messages"][0]["content"]


def test_ask_json_has_answer_citations_trace_usage(examples_index, capsys):
    with StubOpenAI([ok("Answer [1].", prompt_tokens=120, completion_tokens=4)]) as stub:
        code = main(["ask", "webhook signature", "--index", str(examples_index), "--base-url", stub.base_url, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"answer", "citations", "trace", "usage"} <= set(data)
    assert [e["step"] for e in data["trace"]] == ["retrieve", "answer"]
    assert data["usage"]["calls"] == 1 and data["usage"]["prompt_tokens"] == 120
    assert data["citations"][0]["number"] == 1 and data["citations"][0]["chunk_id"] in data["context"]


def test_empty_question_is_a_one_line_error(examples_index, capsys):
    assert main(["ask", "   ", "--index", str(examples_index), "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert _error_line(capsys.readouterr().err).startswith("ragsieve: error: the question is empty")


def test_missing_index_is_a_one_line_error(tmp_path, capsys):
    assert main(["ask", "q", "--index", str(tmp_path / "nope")]) == 2
    assert "nope" in _error_line(capsys.readouterr().err)


def test_unreachable_endpoint_says_what_was_tried(examples_index, tmp_path, capsys):
    config = _config(tmp_path, max_attempts=2, max_retry_s=2.0, timeout_s=2.0)
    code = main(["ask", "q", "--index", str(examples_index), "--config", config, "--base-url", "http://127.0.0.1:9/v1"])
    line = _error_line(capsys.readouterr().err)
    assert code == 2
    assert "http://127.0.0.1:9/v1" in line and "2 attempt" in line


def test_endpoint_fault_then_success_is_retried(examples_index, tmp_path, capsys):
    config = _config(tmp_path, max_attempts=3, max_retry_s=10.0)
    replies = [
        StubReply(429, error_body("slow down"), headers={"Retry-After": "0"}),
        StubReply(500, error_body("boom", type_="server_error")),
        ok("Fine [1]."),
    ]
    with StubOpenAI(replies) as stub:
        code = main(["ask", "rate limits", "--index", str(examples_index), "--config", config, "--base-url", stub.base_url])
        assert len(stub.chat_requests()) == 3
    assert code == 0 and capsys.readouterr().out.startswith("Fine [1].")


def test_unknown_plan_lists_the_valid_ones(examples_index, capsys):
    assert main(["ask", "q", "--index", str(examples_index), "--plan", "nope", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "choose one of agentic, fast, fast+rerank, full, full+rerank" in capsys.readouterr().err


def test_plans_command_lists_transitions(capsys):
    assert main(["plans"]) == 0
    out = capsys.readouterr().out
    assert "fast: start retrieve; retrieve -> next:answer; answer -> next:end" in out
    assert "agentic:" in out and "expand -> grew:judge, converged:answer" in out


def test_bad_config_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval]\nfusion = 3\nnonsense = true\n")
    assert main(["plans", "--config", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err


def test_index_command_reports_summary(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAlpha is the first letter.\n")
    (docs / "empty.txt").write_text("")
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    assert main(["index", str(docs), "--index", str(tmp_path / "idx"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 documents from 1 of 3 files; skipped 1 binary, 1 empty" in out
    assert "wrote gen-1: 1 added, 0 updated, 0 removed, 0 unchanged, 0 kept documents; 1 chunks, 1 embedded" in out
    assert main(["index", str(tmp_path / "missing"), "--index", str(tmp_path / "idx2"), "--no-progress"]) == 2
    assert "missing" in capsys.readouterr().err
