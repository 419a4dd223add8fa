"""Loading files, folders and BEIR corpora: gitignore, HTML text, skip counters, ids."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from pathlib import Path

import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.gitignore import IgnoreSet, parse_gitignore, parse_line
from ragsieve.tools.ingest.html_text import html_to_text
from ragsieve.tools.ingest.loaders import display_path, load_documents

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl.gz"


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def loaded_names(result, root: Path) -> set[str]:
    """Ids are the indexed folder's name, then the path below it."""
    assert all(d.doc_id.startswith(root.name + "/") for d in result.documents)
    return {d.doc_id[len(root.name) + 1 :] for d in result.documents}


# --- gitignore patterns ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, path, is_dir, expected",
    [
        ("*.log", "a.log", False, True),
        ("*.log", "deep/er/a.log", False, True),
        ("*.log", "a.log.txt", False, False),
        ("/build", "build", True, True),
        ("/build", "sub/build", True, False),  # leading slash anchors
        ("doc/frotz", "doc/frotz", False, True),
        ("doc/frotz", "a/doc/frotz", False, False),  # inner slash anchors too
        ("frotz/", "frotz", True, True),
        ("frotz/", "frotz", False, False),  # trailing slash: directories only
        ("**/logs", "a/b/logs", True, True),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**/b", "a/x/c", False, False),
        ("abc/**", "abc/x/y.txt", False, True),
        ("abc/**", "abc", True, False),
        ("file?.txt", "file1.txt", False, True),
        ("file?.txt", "file12.txt", False, False),
        ("file[0-2].txt", "file2.txt", False, True),
        ("file[0-2].txt", "file3.txt", False, False),
        ("file[!0-2].txt", "file3.txt", False, True),
        ("*.txt", "dir/a.txt", False, True),
        ("dir/*.txt", "dir/sub/a.txt", False, False),  # * does not cross /
        ("\\#hash", "#hash", False, True),
    ],
)
def test_pattern_semantics(pattern, path, is_dir, expected):
    rule = parse_line(pattern)
    assert rule is not None
    assert rule.matches(path, is_dir) is expected


def test_comments_blanks_and_negation_parse():
    rules = parse_gitignore("# comment\n\n*.log\n!keep.log\n   \n")
    assert [r.pattern for r in rules] == ["*.log", "!keep.log"]
    assert [r.negated for r in rules] == [False, True]


def test_last_match_wins_and_nested_files_override(tmp_path):
    write(tmp_path / ".gitignore", "*.log\n!keep.log\n")
    write(tmp_path / "sub" / ".gitignore", "keep.log\n!other.log\n")
    top = IgnoreSet().child(tmp_path)
    sub = top.child(tmp_path / "sub")
    assert top.match(tmp_path / "x.log", False) is not None
    assert top.match(tmp_path / "keep.log", False) is None
    assert sub.match(tmp_path / "sub" / "keep.log", False) is not None  # deeper file wins
    assert sub.match(tmp_path / "sub" / "other.log", False) is None
    assert sub.match(tmp_path / "sub" / "x.log", False) is not None  # parent rule still applies


def test_folder_scan_respects_gitignore(tmp_path):
    write(tmp_path / ".gitignore", "*.log.md\n/build/\nsecret*\n!secret_ok.md\n")
    write(tmp_path / "a.md", "# A\nalpha")
    write(tmp_path / "b.log.md", "ignored")
    write(tmp_path / "build" / "out.md", "ignored dir")
    write(tmp_path / "nested" / "build" / "kept.md", "not anchored, kept")
    write(tmp_path / "secret.md", "ignored")
    write(tmp_path / "secret_ok.md", "re-included")
    write(tmp_path / "nested" / ".gitignore", "*.txt\n")
    write(tmp_path / "nested" / "n.txt", "ignored by nested file")
    write(tmp_path / "top.txt", "nested rules do not apply above")
    for skipped_dir in (".git", ".venv", "node_modules", "__pycache__"):
        write(tmp_path / skipped_dir / "x.md", "never scanned")
    result = load_documents([tmp_path])
    assert loaded_names(result, tmp_path) == {"a.md", "nested/build/kept.md", "secret_ok.md", "top.txt"}
    assert result.stats.skipped_ignored == 4  # b.log.md, build/, secret.md, nested/n.txt
    reasons = dict(result.stats.skipped)
    assert "/build/" in reasons[display_path(tmp_path / "build")]
    # .gitignore files themselves are unsupported, the always-skipped dirs are not even seen
    assert result.stats.skipped_unsupported == 2
    assert result.stats.files_seen == 6


def test_explicit_file_is_loaded_even_if_ignored(tmp_path):
    write(tmp_path / ".gitignore", "*.md\n")
    f = write(tmp_path / "x.md", "hello")
    assert load_documents([f]).stats.documents == 1
    assert load_documents([tmp_path]).stats.documents == 0


# --- HTML -----------------------------------------------------------------------------------

HTML = """<!doctype html><html><head><title>  Rotate   keys </title>
<script>var secret = "SCRIPT_TEXT";</script><style>.x{color:red}</style></head>
<body><nav><a href="/">NAV_TEXT</a></nav><header>HEADER_TEXT</header>
<h1>Key rotation</h1><p>Run <code>lumen keys rotate</code>
 to rotate.</p><ul><li>one</li><li>two</li></ul>
<aside>ASIDE_TEXT</aside><noscript>NOSCRIPT_TEXT</noscript>
<svg><title>SVG_TITLE</title></svg><pre>def f():
    return 1</pre><footer>FOOTER_TEXT</footer></body></html>"""


def test_html_keeps_title_and_drops_boilerplate():
    title, text = html_to_text(HTML)
    assert title == "Rotate keys"
    for boiler in (
        "SCRIPT_TEXT",
        "NAV_TEXT",
        "HEADER_TEXT",
        "ASIDE_TEXT",
        "NOSCRIPT_TEXT",
        "SVG_TITLE",
        "FOOTER_TEXT",
        "color:red",
    ):
        assert boiler not in text
    lines = text.split("\n")
    assert "Key rotation" in lines  # block elements become their own lines
    assert "Run lumen keys rotate to rotate." in lines  # inline whitespace collapsed
    assert "- one" in lines and "- two" in lines
    assert "    return 1" in lines  # <pre> keeps its indentation


def test_html_file_document(tmp_path):
    f = write(tmp_path / "page.html", HTML)
    doc = load_documents([f]).documents[0]
    # trafilatura's main text, as markdown so chunks follow the page's headings
    assert (doc.kind, doc.title, doc.line_start) == ("markdown", "Rotate keys", None)
    assert "SCRIPT_TEXT" not in doc.text and "lumen keys rotate" in doc.text


# --- file kinds, ids, counters --------------------------------------------------------------


def test_kinds_titles_ids_and_hashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    md = write(tmp_path / "docs" / "guide.md", "```\n# not a title\n```\n# Real Title\ntext\n")
    write(tmp_path / "docs" / "notes.txt", "plain")
    write(tmp_path / "src" / "m.py", "def f():\n    return 1\n")
    write(tmp_path / "src" / "c.yaml", "a: 1\n")
    write(tmp_path / "data.json", '{"a": 1}')
    result = load_documents(["docs", Path("src"), str(tmp_path / "data.json")])
    by_id = {d.doc_id: d for d in result.documents}
    assert sorted(by_id) == ["docs/guide.md", "docs/notes.txt", "src/c.yaml", "src/m.py"]
    assert by_id["docs/guide.md"].title == "Real Title"
    assert by_id["docs/guide.md"].kind == "markdown"
    assert by_id["docs/notes.txt"].title == "notes.txt"
    assert by_id["src/m.py"].kind == by_id["src/c.yaml"].kind == "code"
    assert by_id["docs/guide.md"].content_hash == hashlib.sha256(md.read_bytes()).hexdigest()
    assert all(d.source == d.doc_id and d.line_start == 1 for d in result.documents)
    assert result.stats.skipped == [("data.json", "unsupported file type '.json'")]
    # ids do not depend on the working directory: the folder's name and the path below it
    again = load_documents([tmp_path / "docs"])
    assert [d.doc_id for d in again.documents] == ["docs/guide.md", "docs/notes.txt"]
    monkeypatch.chdir(tmp_path / "src")
    assert [d.doc_id for d in load_documents([tmp_path / "docs"]).documents] == ["docs/guide.md", "docs/notes.txt"]
    outside = load_documents([tmp_path / "docs" / "notes.txt"]).documents[0]
    assert outside.doc_id == "notes.txt"  # a file indexed by itself: its name


def test_binary_empty_and_non_utf8_are_counted(tmp_path):
    write(tmp_path / "bin.txt", b"abc\x00def" * 10)
    write(tmp_path / "noisy.txt", bytes(range(1, 32)) * 50 + b"\xff\xfe" * 100)
    write(tmp_path / "empty.md", "")
    write(tmp_path / "blank.txt", "  \n\t\n")
    write(tmp_path / "latin1.txt", "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e".encode("latin-1"))
    write(tmp_path / "bom.txt", "\ufeffhello".encode("utf-8"))
    write(tmp_path / "crlf.txt", b"one\r\ntwo\r\n")
    result = load_documents([tmp_path])
    s = result.stats
    assert (s.skipped_binary, s.skipped_empty, s.decoded_with_replacement) == (2, 2, 1)
    assert (s.files_seen, s.files_loaded, s.documents) == (7, 3, 3)
    texts = {Path(d.doc_id).name: d.text for d in result.documents}
    assert texts["latin1.txt"] == "caf\ufffd cr\ufffdme br\ufffdl\ufffde"
    assert texts["bom.txt"] == "hello"
    assert texts["crlf.txt"] == "one\ntwo\n"
    assert "2 binary" in s.summary() and "2 empty" in s.summary()


def test_missing_path_raises_naming_it(tmp_path):
    write(tmp_path / "ok.md", "x")
    missing = tmp_path / "nope" / "missing.md"
    with pytest.raises(UsageError, match="missing.md"):
        load_documents([tmp_path / "ok.md", missing])
    with pytest.raises(UsageError, match="list of paths"):
        load_documents(str(tmp_path))  # type: ignore[arg-type]


def test_duplicate_inputs_load_once_in_sorted_order(tmp_path):
    for name in ("c.md", "a.md", "b/z.md", "b/a.md"):
        write(tmp_path / name, name)
    result = load_documents([tmp_path, tmp_path / "a.md"])
    assert [Path(d.doc_id).name for d in result.documents] == ["a.md", "a.md", "z.md", "c.md"]
    assert [d.text for d in result.documents] == ["a.md", "b/a.md", "b/z.md", "c.md"]


# --- BEIR -----------------------------------------------------------------------------------

RECORDS = [
    {"_id": "d1", "title": "First", "text": "Alpha beta."},
    {"_id": "d2", "title": "Second", "text": "Gamma delta."},
    {"_id": 3, "title": "Only a title", "text": ""},
]


def _jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz"])
def test_beir_corpus(tmp_path, name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(_jsonl(RECORDS) + "\n")
    else:
        write(path, _jsonl(RECORDS) + "\n")
    result = load_documents([path])
    docs = result.documents
    assert [d.doc_id for d in docs] == ["d1", "d2", "3"]
    assert [d.source for d in docs] == [f"{name}#d1", f"{name}#d2", f"{name}#3"]
    assert docs[0].title == "First" and docs[0].text == "Alpha beta."
    assert docs[2].text == "Only a title"
    assert all(d.kind == "beir" and d.line_start is None for d in docs)
    assert docs[0].content_hash == hashlib.sha256(b"First\nAlpha beta.").hexdigest()
    assert (result.stats.files_loaded, result.stats.documents) == (1, 3)


def test_jsonl_without_beir_keys_is_unsupported(tmp_path):
    write(tmp_path / "events.jsonl", _jsonl([{"id": 1, "body": "x"}]))
    result = load_documents([tmp_path / "events.jsonl"])
    assert result.documents == []
    assert result.stats.skipped_unsupported == 1
    assert "_id, title, text" in result.stats.skipped[0][1]


def test_beir_bad_and_duplicate_records_are_listed(tmp_path):
    body = _jsonl(RECORDS[:1]) + "{broken\n" + _jsonl([{"_id": "d1", "title": "", "text": "dup"}])
    result = load_documents([write(tmp_path / "c.jsonl", body)])
    assert [d.doc_id for d in result.documents] == ["d1"]
    assert result.stats.skipped_records == 2
    assert [reason for _, reason in result.stats.skipped][1] == "duplicate doc_id"


def test_progress_bar_goes_to_stderr(tmp_path, capsys):
    write(tmp_path / "a.md", "hello")
    load_documents([tmp_path], progress=True)
    captured = capsys.readouterr()
    assert captured.out == "" and "loading" in captured.err


@pytest.mark.skipif(not SCIFACT.exists(), reason=f"SciFact corpus not found at {SCIFACT}")
def test_scifact_corpus_loads_quickly():
    start = time.perf_counter()
    result = load_documents([SCIFACT])
    elapsed = time.perf_counter() - start
    print(f"SciFact: {result.stats.documents} documents loaded in {elapsed:.2f}s")
    assert result.stats.documents == len(result.documents) == 5183
    assert len({d.doc_id for d in result.documents}) == 5183
    assert elapsed < 10  # a couple of seconds on an idle machine; generous for a shared 2-core box
