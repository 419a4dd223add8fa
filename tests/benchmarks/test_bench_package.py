"""The benchmark package: no import cycles inside benchmarks/ (imports inside functions included), and no test
reaches into it through sys.path (tests import `benchmarks.<family>.<module>`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = REPO / "benchmarks") -> dict[str, set[str]]:
    """Each benchmark module -> the benchmark modules it imports (`from benchmarks.x import y` names module
    benchmarks.x.y when that is a module, else benchmarks.x)."""
    modules = {_module(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_import_cycles_inside_benchmarks():
    graph = import_graph()
    assert "benchmarks.report" in graph and "benchmarks.figures" in graph["benchmarks.report"]
    assert cycles(graph) == []


def test_no_test_reaches_into_benchmarks_through_sys_path():
    reaching = [
        p.name
        for p in (REPO / "tests").rglob("*.py")
        if any(
            re.search(r"sys\.path\.(insert|append)\(", line) and "benchmarks" in line
            for line in p.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert reaching == []


def missing_imports(root: Path = REPO / "benchmarks") -> list[str]:
    """`benchmarks.…` imports (inside functions too) that name no module or package of the tree: a retired module
    someone still imports (issue 59 retired studies; `tracing_phoenix` kept importing one)."""

    def name(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name(p) for p in root.rglob("*.py")}
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            out += [f"{name(path)}: {n}" for n in names if n.split(".")[0] == "benchmarks" and n not in modules]
    return out


def test_every_benchmark_import_names_a_module_of_the_tree(tmp_path):
    assert missing_imports() == []
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "a.py").write_text("from benchmarks.gone import x\n", encoding="utf-8")
    assert missing_imports(tmp_path / "benchmarks") != []  # the check can fail
