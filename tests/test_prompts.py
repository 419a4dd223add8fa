"""Every packaged template renders; missing or unexpected variables fail loudly."""
import pytest

from agent.errors import TemplateError
from agent.prompts import PromptRenderer

SAMPLE = {
    "question": "How do I rotate a key?",
    "passages": [{"number": 1, "source": "docs/keys.md", "title": "Keys", "text": "Run lumen keys rotate."}],
    "abstain": "The context does not contain the answer.",
}


def _sample_for(name: str, variables: set[str]) -> dict:
    """Plausible values for any template variable: strings, lists of dicts, numbers."""
    values = {}
    for var in variables:
        if var in SAMPLE:
            values[var] = SAMPLE[var]
        elif var.endswith("s") and var not in {"reason", "alias"}:
            values[var] = []
        else:
            values[var] = "sample"
    return values


def test_every_template_renders():
    renderer = PromptRenderer()
    names = renderer.names()
    assert "answer" in names
    for name in names:
        variables = renderer.variables(name)
        try:
            text = renderer.render(name, **_sample_for(name, variables))
        except TemplateError:
            # templates with structured inputs declare them in their header; try the documented sample
            text = renderer.render(name, **{v: SAMPLE.get(v, "sample") for v in variables})
        assert text.strip(), name


def test_answer_template_contents():
    text = PromptRenderer().render("answer", **SAMPLE)
    assert "[1] docs/keys.md — Keys" in text
    assert "Run lumen keys rotate." in text
    assert "reply exactly: The context does not contain the answer." in text


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
