"""Lower-case compound identifiers (`getheader`, `readline`) split into words for BM25 documents, and code
chunk headers that spell their symbols' names in words (`ragsieve.tools.index.search.compounds`,
`report.indexed_text`)."""

from __future__ import annotations

import json
from pathlib import Path

from ragsieve.tools.index.building.report import indexed_text, symbol_words
from ragsieve.tools.index.milvus.schema import analysed
from ragsieve.tools.index.search.bm25 import BM25Index, tokenize
from ragsieve.tools.index.search.compounds import compound_words, split_compound
from ragsieve.tools.types import Chunk

CODE = [
    "def getheader(self, name, default=None):\n    return self.msg.get_all(name) or default\n",
    "def readline(self, limit=-1):\n    return self.fp.readline(limit)\n",
    "def close(self):\n    self.fp.close()\n    self.closed = True\n",
    "def fileno(self):\n    return self.fp.fileno()\n",
]


def test_lower_case_compounds_split_into_the_fewest_words_and_words_stay_whole():
    assert split_compound("getheader") == ("get", "header")
    assert split_compound("readline") == ("read", "line")
    assert split_compound("formatmonthname") == ("format", "month", "name")
    for word in ("header", "chunked", "response", "read", "fget"):  # words, forms of a word, short runs
        assert split_compound(word) == (), word
    assert compound_words("x = getHeader(readline)") == ["read", "line"]  # a case change is identifiers.py's


def test_documents_get_the_words_of_their_compounds_and_queries_do_not():
    doc = tokenize(CODE[0], True, True, compounds=True)
    assert "gethead" in doc and {"get", "header"} <= set(doc)
    assert "header" not in tokenize(CODE[0], True, True)  # the tokenizer of old indexes
    assert tokenize("getheader", True, True) == ["gethead"]  # a query names it whole, as before


def test_bm25_finds_a_lower_case_compound_by_its_words():
    query = "Returns the value of the header matching name"  # getheader's docstring, blanked in the code
    with_words = BM25Index().build(CODE)
    assert with_words.compounds and with_words.search(query, 1)[0][0] == 0
    assert with_words.search("read a line", 1)[0][0] == 1
    without = BM25Index(compounds=False).build(CODE)
    assert 0 not in [r for r, _ in without.search("header", 4)]
    prose = BM25Index().build(CODE, kinds=["text"] * len(CODE))  # an index's prose chunks keep their terms
    assert 0 not in [r for r, _ in prose.search("header", 4)]


def test_the_setting_is_saved_and_an_old_index_keeps_its_tokenizer(tmp_path: Path):
    BM25Index().build(CODE).save(tmp_path / "new")
    assert BM25Index.load(tmp_path / "new").compounds is True
    BM25Index(compounds=False).build(CODE).save(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / "bm25.json").read_text(encoding="utf-8"))
    del meta["compounds"]  # written before compound terms existed
    (tmp_path / "old" / "bm25.json").write_text(json.dumps(meta), encoding="utf-8")
    old = BM25Index.load(tmp_path / "old")
    assert old.compounds is False and old.search("header", 4) == []


def test_milvus_receives_the_compound_words_as_plain_terms():
    text = analysed(CODE[0] + " re.search", True, True, compounds=True).split()
    assert {"get", "header", "re_d0t_search"} <= set(text)  # \w runs: Milvus' standard tokenizer keeps them
    assert analysed("getheader", True, True) == "gethead"


def test_code_headers_spell_symbol_names_in_words():
    assert symbol_words("HTTPResponse._read_chunked") == "http response read chunked"
    assert symbol_words("HTTPResponse.getheader, HTTPResponse.getheaders, ...") == "http response get header headers"
    assert symbol_words("") == ""
    chunk = Chunk(
        doc_id="http/client.py",
        chunk_index=3,
        text="def _read_chunked(self, amt=None):\n",
        source="http/client.py",
        kind="code",
        symbol="HTTPResponse._read_chunked",
    )
    assert indexed_text(chunk, True, True) == (
        "http/client.py HTTPResponse._read_chunked\nhttp response read chunked\ndef _read_chunked(self, amt=None):\n"
    )
    assert indexed_text(chunk) == "http/client.py HTTPResponse._read_chunked\ndef _read_chunked(self, amt=None):\n"
    page = Chunk(
        doc_id="re.html", chunk_index=0, text="re.search(pattern, string)", source="re.html", kind="html", symbol="#re.search"
    )
    assert indexed_text(page, True, True) == indexed_text(page)  # a web page's anchor header is left as it was
