"""The import graph keeps its layers: no new cycle, no new upward or sideways edge, and the picture is current.

The edges and cycles that existed when this test was written (issue 45 lists them) are named below. The test
fails on any violation not in these lists, and on any listed one that is gone, so that the lists only shrink:
whoever removes a violation deletes its line here. Issue 45's restructuring empties them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import architecture_graph as arch  # noqa: E402

KNOWN_CYCLES: list[list[str]] = [
]
KNOWN_UPWARD: list[tuple[str, str]] = [
]
KNOWN_SIDEWAYS: list[tuple[str, str]] = [
]


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return arch.graph()


def _ratchet(found: list, known: list, what: str) -> None:
    new = [x for x in found if x not in known]
    gone = [x for x in known if x not in found]
    assert not new, f"new {what} (layers: {arch.LAYERS}, lowest first; see docs/architecture.md): {new}"
    assert not gone, f"these {what} are gone: delete them from the lists in tests/test_architecture.py: {gone}"


def test_no_new_import_cycle(edges):
    _ratchet(arch.cycles(edges), KNOWN_CYCLES, "import cycles")


def test_no_new_upward_edge(edges):
    _ratchet(arch.upward(edges), KNOWN_UPWARD, "imports from a lower layer to a higher one")


def test_no_new_sideways_edge(edges):
    _ratchet(arch.sideways(edges), KNOWN_SIDEWAYS, "step-to-step or into-the-CLI imports")


def test_the_rules_catch_what_they_name():
    """The checks themselves: a planted cycle, an upward edge and a step importing a step are found."""
    planted = {"ragsieve.tools.a": {"ragsieve.tools.b"}, "ragsieve.tools.b": {"ragsieve.tools.a"},
               "ragsieve.tools.errors": {"ragsieve.agent.orchestrator"}, "ragsieve.agent.orchestrator": set(),
               "ragsieve.agent.steps.judge": {"ragsieve.agent.steps.expand"}, "ragsieve.agent.steps.expand": set()}
    assert arch.cycles(planted) == [["ragsieve.tools.a", "ragsieve.tools.b"]]
    assert arch.upward(planted) == [("ragsieve.tools.errors", "ragsieve.agent.orchestrator")]
    assert arch.sideways(planted) == [("ragsieve.agent.steps.judge", "ragsieve.agent.steps.expand")]


def test_function_level_imports_count(tmp_path):
    pkg = tmp_path / "tools"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("def f():\n    from ragsieve.tools import b\n    return b\n", encoding="utf-8")
    (pkg / "b.py").write_text("from ragsieve.tools.a import f\n", encoding="utf-8")
    for folder in ("agent", "prompts", "ragsieve"):
        (tmp_path / folder).mkdir()
    assert arch.cycles(arch.graph(tmp_path)) == [["ragsieve.tools.a", "ragsieve.tools.b"]]


def test_type_checking_imports_do_not_count(tmp_path):
    pkg = tmp_path / "tools"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ragsieve.tools.b import B\n",
                              encoding="utf-8")
    (pkg / "b.py").write_text("from ragsieve.tools.a import TYPE_CHECKING\n", encoding="utf-8")
    for folder in ("agent", "prompts", "ragsieve"):
        (tmp_path / folder).mkdir()
    assert arch.cycles(arch.graph(tmp_path)) == []


def test_docs_architecture_picture_is_current(edges):
    text = arch.DOC.read_text(encoding="utf-8")
    assert text == arch.render_doc(text, edges, arch.packages()), \
        "docs/architecture.md is stale: run `python tests/architecture_graph.py --write`"
