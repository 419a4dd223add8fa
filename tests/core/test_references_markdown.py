"""The Sources list a chat reply's `content` ends with is markdown that shows each file name as it is: Open
WebUI 0.12.4 showed `examples/code/lumen_client/__init__.py` as "lumen_client/**init**.py" (a run of
benchmarks/service/frontends.py), naming a file that does not exist."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragsieve.agent.answer.grounding import Grounding
from ragsieve.agent.core.state import Citation
from ragsieve.service.chat.render import references

markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the markdown (rich brings it)")

CITATIONS = [
    Citation(
        number=1, chunk_id="a#0", source="examples/code/lumen_client/__init__.py", title="__init__.py", line_start=1, line_end=7
    ),
    Citation(number=2, chunk_id="b#0", source="docs/*glob*/[draft] notes.md", title="<b>Notes</b>", line_start=3),
    Citation(
        number=3,
        chunk_id="c#0",
        source="examples/code/lumen_client/keys.py",
        symbol="rotate_key",
        line_start=30,
        line_end=40,
        cited=False,
    ),
]


def test_file_names_and_titles_show_as_they_are_in_markdown():
    answer = SimpleNamespace(grounding=Grounding.CITED, citations=CITATIONS)
    text = markdown_it.MarkdownIt().render(references(answer))
    shown = markdown_it.MarkdownIt().parse(references(answer))
    inline = "".join(t.content for block in shown if block.children for t in block.children if t.type == "text")
    assert "examples/code/lumen_client/__init__.py:1-7 (__init__.py)" in inline
    assert "docs/*glob*/[draft] notes.md:3 (<b>Notes</b>)" in inline
    assert "examples/code/lumen_client/keys.py:30-40 (rotate_key)" in inline  # inner underscores left alone
    assert "<strong>" in text and text.count("<strong>") == 1  # only the **Sources** heading
    assert "<em>" in text and text.count("<em>") == 1  # only the "retrieved, not cited" mark
    assert "<b>" not in text and "<a " not in text
