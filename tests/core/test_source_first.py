"""`source-first` ranking: for "where is X implemented", the definition in a source file comes before the tests
that call it and the prose that describes it (a real index of a tiny repository, the CLI's `search --json`)."""

from __future__ import annotations

import json

import pytest

from ragsieve.cli.main import main
from ragsieve.tools.index.query.source_first import is_test_path

PROSE = "# Rotating keys\n\n" + "To rotate the signing key call rotate signing key; rotate signing key rotates it. " * 8
TESTS = "\n\n".join(
    f"def test_rotate_signing_key_{i}():\n    assert rotate_signing_key('k{i}') != 'k{i}'  # rotate signing key" for i in range(8)
)
SOURCE = (
    'def rotate_signing_key(old):\n    """Return a fresh key replacing `old`."""\n'
    "    import secrets\n    return secrets.token_hex(16)\n"
)


@pytest.mark.parametrize(
    "path,expected",
    [
        ("tests/test_auth.py", True),
        ("src/pkg/auth_test.go", True),
        ("web/app.spec.ts", True),
        ("conftest.py", True),
        ("src/pkg/auth.py", False),
        ("docs/testing-guide.md", False),
        ("src/contest.py", False),
    ],
)
def test_test_paths(path, expected):
    assert is_test_path(path) is expected


def test_the_definition_comes_first(tmp_path, capsys, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder

    repo = tmp_path / "repo"
    for rel, text in {"src/pkg/auth.py": SOURCE, "tests/test_auth.py": TESTS, "docs/keys.md": PROSE}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    IndexBuilder(tmp_path / "index", embedder=embedder, progress=False).build([str(repo)])

    def search(*more: str) -> list[str]:
        assert main(["search", "rotate signing key", "--index", str(tmp_path / "index"), "--top-k", "3", "--json", *more]) == 0
        return [h["source"] for h in json.loads(capsys.readouterr().out)["hits"]]

    hybrid, first = search(), search("--ranking", "source-first")
    assert not hybrid[0].endswith("src/pkg/auth.py")  # the tests and prose outrank it in the fused order
    assert first[0].endswith("src/pkg/auth.py") and first[1].endswith("tests/test_auth.py")
    assert [s.endswith(".md") for s in first] == sorted(s.endswith(".md") for s in first)  # prose last
