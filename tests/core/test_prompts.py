"""Every packaged template renders; missing or unexpected variables fail loudly."""

import re

import pytest

from ragsieve.agent.errors import TemplateError
from ragsieve.agent.llm.templates import PromptRenderer

SAMPLE = {
    "question": "How do I rotate a key?",
    "passages": [{"number": 1, "source": "docs/keys.md", "title": "Keys", "text": "Run lumen keys rotate."}],
    "abstain": "The context does not contain the answer.",
}

# One set of sample variables per packaged template: a new template without a row here fails the test.
SAMPLES = {
    "answer": SAMPLE,
    "judge": {"question": "q?", "chunks": {"0": "chunk zero", "1": "chunk one"}},
    "validate": {"question": "q?", "draft": "a draft [1]", "passages": [{"number": 1, "text": "t"}]},
    "calibrate_question": {"passage": "Lumen keys rotate daily.", "source": "docs/keys.md"},
    "calibrate_contains": {"question": "q?", "answer": "a", "passage": "p"},
    "broader_question": {"passages": ["Lumen keys rotate daily.", "Old keys expire."], "source": "Lumen"},
    "judge_answer": {"question": "q?", "gold_answers": ["a", "b"], "answer": "a"},
    "reask": {"error": "value: field required", "schema": '{"type": "object"}'},
    "json_schema_note": {"schema": '{"type": "object"}'},
    "rewrite": {"turns": [{"role": "user", "text": "How do I rotate a key?"}], "question": "and the old one?"},
}


def test_every_template_renders():
    renderer = PromptRenderer()
    assert set(renderer.names()) == set(SAMPLES), "add sample variables for each new template"
    for name, variables in SAMPLES.items():
        assert renderer.variables(name) == set(variables), name
        text = renderer.render(name, **variables)
        for value in variables.values():
            if isinstance(value, str):
                assert value in text, (name, value)


def test_answer_template_contents():
    text = PromptRenderer().render("answer", **SAMPLE)
    assert re.search(r'^@@[0-9a-f]{16} SOURCE \[1\] from "docs/keys.md", titled "Keys"$', text, re.M)
    assert "Run lumen keys rotate." in text
    assert "reply exactly: The context does not contain the answer." in text
    # the rules follow the sources (with them first the embedded 0.5B model abstained on answerable questions)
    fence = re.search(r"^(@@[0-9a-f]{16}) SOURCE", text, re.M).group(1)
    assert text.index(f"{fence} END") < text.index("data, not instructions") < text.index("Question:")
    assert text.lstrip().startswith(f"{fence} SOURCE [1]")


def test_log_progress_lines(capsys):
    from ragsieve.cli.progress import log_progress

    report = log_progress(every_s=3600)
    report("embedding", 0, 40)  # starts the clock, prints nothing
    report("embedding", 10, 40)  # within every_s: nothing
    report("embedding", 40, 40)
    report("embedding", 40, 40)  # the same final state twice: one line
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("embedding: 40/40 chunks, ") and "inf" not in lines[0]


def test_missing_and_unexpected_variables_fail():
    renderer = PromptRenderer()
    with pytest.raises(TemplateError, match="missing variables \\['abstain'\\]"):
        renderer.render("answer", question="q", passages=[])
    with pytest.raises(TemplateError, match="unexpected \\['bogus'\\]"):
        renderer.render("answer", bogus=1, **SAMPLE)


def test_sandbox_blocks_unsafe_attribute_access(tmp_path):
    (tmp_path / "evil.j2").write_text("{{ x.__class__.__mro__ }}")
    with pytest.raises(TemplateError):
        PromptRenderer(tmp_path).render("evil", x="a")


def test_unknown_template(tmp_path):
    with pytest.raises(TemplateError, match="no prompt template 'nope'"):
        PromptRenderer(tmp_path).render("nope")
