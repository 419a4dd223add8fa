"""A mistyped index folder ends every command in one clear line (exit code 2), never a traceback, and no command
creates the folder it was wrongly given (issue 55, item 6). Run through the real CLI in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = [
    ["serve", "--index", "docs=./nope", "--port", "0"],
    ["mcp", "--index", "./nope"],
    ["ask", "--index", "./nope", "what is this?"],
    ["search", "--index", "./nope", "anything"],
    ["remove", "--index", "./nope", "a.md"],
    ["calibrate", "--index", "./nope"],
    ["migrate", "--to", "local", "--index", "./nope"],
    ["migrate", "--to", "milvus", "--index", "./nope"],
    ["access", "explain", "--index", "./nope", "--as", "user:a", "a.md"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_missing_index_folder_is_one_line_naming_it(argv, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ragsieve", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("ragsieve: error: ") and "nope" in lines[0] and "does not exist" in lines[0], lines
    if argv[0] == "serve":
        assert "index 'docs'" in lines[0]  # the name the user gave, beside the folder
    assert not (tmp_path / "nope").exists()  # nothing created at the mistyped path
