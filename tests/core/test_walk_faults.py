"""Issue 10, per-file faults: each bad path is counted, named and skipped; the build goes on.

Real files throughout: odd names, symlink loops, FIFOs, unreadable files (as `nobody`
when the tests run as root), corrupt archives, deep folders, hostile ignore patterns.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ragsieve.tools.ingest import walk
from ragsieve.tools.ingest.decoding import decode_bytes
from ragsieve.tools.ingest.gitignore import parse_gitignore
from ragsieve.tools.ingest.loaders import load_documents


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def reasons(result) -> dict[str, str]:
    return {Path(p).name: r for p, r in result.stats.skipped}


def test_non_utf8_name_is_skipped_and_named(tmp_path):
    write(tmp_path / "good.md", "# Good\nfine text")
    bad = os.path.join(os.fsencode(tmp_path), b"bad\xff.md")
    with open(bad, "wb") as fh:
        fh.write(b"text in a badly named file")
    result = load_documents([tmp_path])
    assert [Path(d.doc_id).name for d in result.documents] == ["good.md"]
    assert result.stats.skipped_bad_names == 1
    ((path, reason),) = result.stats.problems()
    assert path.endswith("bad\\xff.md") and reason == "name is not UTF-8"
    path.encode("utf-8")  # the name is printable and storable


def test_symlink_to_itself_and_cycle_are_skipped(tmp_path):
    write(tmp_path / "a.md", "alpha text")
    os.symlink("self.md", tmp_path / "self.md")
    os.symlink("loop2.md", tmp_path / "loop1.md")
    os.symlink("loop1.md", tmp_path / "loop2.md")
    os.symlink(tmp_path, tmp_path / "dirloop")  # a symlinked folder pointing up: not followed
    result = load_documents([tmp_path])
    assert [Path(d.doc_id).name for d in result.documents] == ["a.md"]
    r = reasons(result)
    assert "symlink" in r["self.md"] and "symlink" in r["loop1.md"] and "symlink" in r["loop2.md"]
    assert "not followed" in r["dirloop"]
    assert result.stats.skipped_unreadable == 3
    assert "3 unreadable" in result.stats.summary()


def test_fifo_named_on_the_command_line_does_not_block(tmp_path):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    write(tmp_path / "x.md", "text")
    result = load_documents([fifo, tmp_path / "x.md"])  # would block for ever if opened
    assert result.stats.documents == 1 and result.stats.skipped_special == 1
    assert "FIFO" in reasons(result)["pipe.md"]
    assert load_documents([tmp_path]).stats.skipped_special == 1  # inside a folder too


def test_corrupt_gzip_corpus_is_skipped(tmp_path):
    good = b"".join(json.dumps({"_id": str(i), "title": "t", "text": f"record {i}"}).encode() + b"\n" for i in range(50))
    (tmp_path / "corpus.jsonl.gz").write_bytes(gzip.compress(good)[:-30] + b"garbage-garbage-garbage-garbage")
    (tmp_path / "notgz.jsonl.gz").write_bytes(b"this is not gzip at all")
    write(tmp_path / "ok.md", "fine")
    result = load_documents([tmp_path])
    assert [d.doc_id.rsplit("/", 1)[-1] for d in result.documents] == ["ok.md"]
    r = reasons(result)
    assert "corrupt" in r["corpus.jsonl.gz"] and "corrupt" in r["notgz.jsonl.gz"]
    assert result.stats.skipped_unreadable == 2


def test_folders_1000_deep_do_not_recurse(tmp_path):
    deep = tmp_path
    for _ in range(1000):
        deep = deep / "d"
        deep.mkdir()
    try:
        write(tmp_path / "d" / "top.md", "near the top")
        (deep / "bottom.md").write_text("very deep")
        result = load_documents([tmp_path])
        assert [Path(d.doc_id).name for d in result.documents] == ["top.md"]
        assert result.stats.skipped_too_deep == 1
        assert f"more than {walk.MAX_DEPTH}" in result.stats.problems()[0][1]
    finally:  # remove bottom-up: pytest's own (recursive) cleanup would overflow on 1,000 levels
        (deep / "bottom.md").unlink()
        while deep != tmp_path:
            for leftover in deep.iterdir():
                leftover.unlink()
            deep.rmdir()
            deep = deep.parent


def test_bad_ignore_pattern_is_reported_and_the_rest_apply(tmp_path):
    write(tmp_path / ".gitignore", "[z-a]\n*.log.md\n" + "**/" * 11 + "x.md\n")
    write(tmp_path / "a.md", "kept")
    write(tmp_path / "b.log.md", "ignored")
    write(tmp_path / "s" / "t" / "x.md", "ignored by the **/ line")
    result = load_documents([tmp_path])
    assert [Path(d.doc_id).name for d in result.documents] == ["a.md"]
    assert result.stats.bad_ignore_patterns == 1 and result.stats.skipped_ignored == 2
    where, why = result.stats.problems()[0]
    assert where.endswith(".gitignore:1") and "[z-a]" in why
    bad: list = []
    assert [r.pattern for r in parse_gitignore("[z-a]\nok\n", bad=bad)] == ["ok"] and len(bad) == 1


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_unreadable_file_and_folder_are_skipped():
    root = Path(tempfile.mkdtemp(prefix="rs-perm-"))  # not under tmp_path: the child must not depend on its parents' modes
    try:
        os.chmod(root, 0o755)
        write(root / "ok.md", "readable")
        write(root / "secret.md", "nobody may read this")
        write(root / "locked" / "inner.md", "nor this")
        os.chmod(root / "ok.md", 0o644)
        os.chmod(root / "secret.md", 0o000)
        os.chmod(root / "locked", 0o000)
        code = (
            "import json,sys; from ragsieve.tools.ingest.loaders import load_documents; "
            "r = load_documents([sys.argv[1]]); "
            "print(json.dumps([[d.doc_id for d in r.documents], r.stats.problems()]))"
        )
        command = [sys.executable, "-c", code, str(root)]
        if os.geteuid() == 0:  # root reads everything: drop the capabilities that bypass permissions
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: permissions cannot be enforced")
            drop = "-dac_override,-dac_read_search"
            command = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"] + command
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        docs, problems = json.loads(out.stdout)
        assert [Path(d).name for d in docs] == ["ok.md"]
        named = {Path(p).name: r for p, r in problems}
        assert named["secret.md"].startswith("unreadable") and "Permission denied" in named["secret.md"]
        assert named["locked"].startswith("unreadable folder")
    finally:
        os.chmod(root / "secret.md", 0o644)
        os.chmod(root / "locked", 0o755)
        shutil.rmtree(root)


@pytest.mark.parametrize(
    "encoding, bom",
    [
        ("utf-16", b""),
        ("utf-16-le", b"\xff\xfe"),
        ("utf-16-be", b"\xfe\xff"),
        ("utf-16-le", b""),
        ("utf-16-be", b""),
        ("utf-32", b""),
    ],
)
def test_utf16_and_utf32_text_is_decoded_not_skipped(tmp_path, encoding, bom):
    text = "Grüße: the rotation key is in vault/ops.\nSecond line."
    raw = bom + text.encode(encoding)
    assert decode_bytes(raw) == (text, False)
    (tmp_path / "u.txt").write_bytes(raw)
    result = load_documents([tmp_path / "u.txt"])
    assert result.stats.skipped_binary == 0 and result.documents[0].text == text


def test_real_binary_is_still_binary():
    assert decode_bytes(bytes(range(256)) * 40)[0] is None
    assert decode_bytes(b"\x00\x01\x02\x03" * 1000)[0] is None


def test_build_survives_every_fault_at_once(tmp_path, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    corpus = tmp_path / "c"
    write(corpus / "good.md", "# Good\nThe deploy key rotates monthly.")
    with open(os.path.join(os.fsencode(corpus), b"n\xe9.md"), "wb") as fh:
        fh.write(b"latin-1 named")
    os.symlink("self.md", corpus / "self.md")
    os.mkfifo(corpus / "fifo.md")
    (corpus / "corpus.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    write(corpus / ".gitignore", "[z-a]\n")
    report = IndexBuilder(tmp_path / "idx", embedder=embedder, progress=False).build([corpus])
    assert report.written and report.docs_added == 1
    assert "problems:" in report.load_summary
    with HybridIndex.open(tmp_path / "idx") as index:
        assert len(index) == 1


def test_oversized_file_is_skipped_unread(tmp_path, monkeypatch):
    import ragsieve.tools.ingest.loaders as loaders

    monkeypatch.setattr(loaders, "MAX_FILE_BYTES", 1000)
    write(tmp_path / "big.txt", "word " * 300)
    write(tmp_path / "small.txt", "word " * 10)
    result = load_documents([tmp_path])
    assert [Path(d.doc_id).name for d in result.documents] == ["small.txt"]
    assert result.stats.skipped_too_large == 1 and "too large: over 1000 bytes" in reasons(result)["big.txt"]
    assert "1 too large" in result.stats.summary()
