"""The import graph keeps its layers: no new cycle of modules or of sub-packages (type-only imports counted), no
new upward or sideways edge, and the picture is current.

The lists below once named the violations that existed when a rule was written (issues 45 and 57); the test
fails on any violation not in them, and on any listed one that is gone, so that the lists only shrink. They
are empty and stay so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import architecture_graph as arch  # noqa: E402

KNOWN_CYCLES: list[list[str]] = []
KNOWN_UPWARD: list[tuple[str, str]] = []
KNOWN_SIDEWAYS: list[tuple[str, str]] = []
KNOWN_ROOM_CYCLES: list[list[str]] = []


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


def test_no_new_sub_package_cycle(edges):
    found = arch.room_cycles(edges, arch.packages())
    new = [(members, why) for members, why in found if members not in KNOWN_ROOM_CYCLES]
    assert not new, (
        "sub-packages importing each other in a cycle (members, then the imports that close it; "
        f"move the shared module below both, or ask through a protocol): {new}"
    )
    gone = [c for c in KNOWN_ROOM_CYCLES if c not in [m for m, _ in found]]
    assert not gone, f"these sub-package cycles are gone: delete them from KNOWN_ROOM_CYCLES: {gone}"


def test_no_new_upward_edge(edges):
    _ratchet(arch.upward(edges), KNOWN_UPWARD, "imports from a lower layer to a higher one")


def test_no_new_sideways_edge(edges):
    _ratchet(arch.sideways(edges), KNOWN_SIDEWAYS, "step-to-step or into-the-CLI imports")


def test_the_rules_catch_what_they_name():
    """The checks themselves: a planted cycle, an upward edge and a step importing a step are found."""
    planted = {
        "ragsieve.tools.a": {"ragsieve.tools.b"},
        "ragsieve.tools.b": {"ragsieve.tools.a"},
        "ragsieve.tools.errors": {"ragsieve.agent.orchestrator"},
        "ragsieve.agent.orchestrator": set(),
        "ragsieve.agent.steps.judge": {"ragsieve.agent.steps.expand"},
        "ragsieve.agent.steps.expand": set(),
    }
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


def test_type_checking_imports_count(tmp_path):
    """A type-only import is still a dependency of the design: a cycle through one is a cycle (issue 57); the
    runtime graph alone leaves it out."""
    pkg = tmp_path / "tools"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ragsieve.tools.b import B\n", encoding="utf-8"
    )
    (pkg / "b.py").write_text("from ragsieve.tools.a import TYPE_CHECKING\n", encoding="utf-8")
    for folder in ("agent", "prompts", "ragsieve"):
        (tmp_path / folder).mkdir()
    assert arch.cycles(arch.graph(tmp_path)) == [["ragsieve.tools.a", "ragsieve.tools.b"]]
    assert arch.cycles(arch.runtime_graph(tmp_path)) == []


def test_sub_package_cycles_are_found(tmp_path):
    """Two sub-packages whose modules import each other's (no module cycle) are a cycle of rooms, named with
    the imports that make it; a type-only import closes one too."""
    for folder, files in {
        "tools/index/local": {"index.py": "from ragsieve.tools.index.query import bm25\n"},
        "tools/index/query": {
            "bm25.py": "",
            "retriever.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ragsieve.tools.index.local.index import X\n",
        },
    }.items():
        (tmp_path / folder).mkdir(parents=True)
        for name, text in {"__init__.py": "", **files}.items():
            (tmp_path / folder / name).write_text(text, encoding="utf-8")
    for parent in ("tools", "tools/index"):
        (tmp_path / parent / "__init__.py").write_text("", encoding="utf-8")
    for folder in ("agent", "prompts", "ragsieve"):
        (tmp_path / folder).mkdir()
    edges = arch.graph(tmp_path)
    assert arch.cycles(edges) == []
    assert arch.room_cycles(edges, arch.packages(tmp_path)) == [
        (
            ["ragsieve.tools.index.local", "ragsieve.tools.index.query"],
            [
                ("ragsieve.tools.index.local.index", "ragsieve.tools.index.query.bm25"),
                ("ragsieve.tools.index.query.retriever", "ragsieve.tools.index.local.index"),
            ],
        )
    ]
    assert arch.room_cycles(arch.runtime_graph(tmp_path), arch.packages(tmp_path)) == []


def test_docs_architecture_picture_is_current(edges):
    text = arch.DOC.read_text(encoding="utf-8")
    assert text == arch.render_doc(text, edges, arch.packages()), (
        "docs/architecture.md is stale: run `python tests/architecture_graph.py --write`"
    )
