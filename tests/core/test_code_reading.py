"""Code read as code, on the CPython standard library (real code nobody here wrote): correct symbol labels on
merged chunks, split functions stitched into one passage (within the budget) before every plan's answer,
the symbol table that finds a named definition, `where symbol_kind`, and same-label citations merged."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from ragsieve.agent.answer.answering import answer_from_context
from ragsieve.agent.answer.citation_merge import merge_same_label
from ragsieve.agent.config import Config
from ragsieve.agent.core.state import Citation
from ragsieve.agent.core.step import Deps
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.testing import FakeChat
from ragsieve.tools.filters.stitch import stitch_definitions
from ragsieve.tools.index.search.symbols import SymbolTable, named_identifiers
from ragsieve.tools.index.search.where import Where
from ragsieve.tools.ingest.chunking import Chunker
from ragsieve.tools.types import Document, Hit

STDLIB = Path(sysconfig.get_paths()["stdlib"])


class Store:
    def __init__(self, chunks):
        self.chunks = chunks

    def chunks_of(self, doc_id):
        return [c for c in self.chunks if c.doc_id == doc_id]


def chunks_of(rel: str):
    text = (STDLIB / rel).read_text(encoding="utf-8")
    return Chunker(200).run(Document(doc_id=rel, source=rel, text=text, kind="code"))


def piece(chunks, symbol: str, contains: str = ""):
    return next(c for c in chunks if c.symbol == symbol and contains in c.text)


def test_merged_chunks_name_each_symbol_by_the_tree():
    labels = {c.symbol for c in chunks_of("asyncio/tasks.py")} | {c.symbol for c in chunks_of("logging/config.py")}
    assert "_release_waiter, wait_for" in labels and "dictConfig, listen" in labels
    assert not [s for s in labels if "wait_for._release_waiter" in s or "listen.dictConfig" in s]


def test_a_split_function_is_stitched_into_one_passage():
    chunks = chunks_of("asyncio/tasks.py")
    store = Store(chunks)
    middle = piece(chunks, "wait_for", "timeout_handle = loop.call_later")
    tail = piece(chunks, "wait_for", "await waiter")
    hits = [Hit(chunk=middle, row=1, score=1.0), Hit(chunk=tail, row=2, score=0.5)]
    out = stitch_definitions(hits, store, budget_tokens=3000)
    assert len(out) == 1  # two pieces of one definition: one passage
    passage = out[0].chunk
    assert passage.symbol == "wait_for" and passage.text.startswith("async def wait_for(fut, timeout):")
    assert "await waiter" in passage.text and "timeout_handle" in passage.text
    assert "_release_waiter(waiter" not in passage.text.split("\n")[0]
    assert passage.text.rstrip().endswith((STDLIB / "asyncio/tasks.py").read_text().split("\n")[passage.line_end - 1].strip())
    # over the budget: the pieces stay as they were
    assert [h.chunk.text for h in stitch_definitions(hits, store, budget_tokens=300)] == [middle.text, tail.text]
    # a whole small function is left alone
    small = piece(chunks, "_cancel_and_wait")
    assert stitch_definitions([Hit(chunk=small, row=3, score=1.0)], store, 3000)[0].chunk == small


def test_a_piece_reaches_the_answer_prompt_as_the_whole_method():
    chunks = chunks_of("http/client.py")
    store = Store(chunks)
    loop = next(c for c in chunks if c.symbol == "HTTPResponse.read" and "def read(" not in c.text)  # its 2nd piece

    class Index:
        pass

    index = Index()
    index.store = store
    chat = FakeChat(["It is read in a loop [1]."])
    deps = Deps(config=Config(), retriever=None, index=index, llm=LLM(chat), prompts=PromptRenderer())
    text, citations = answer_from_context("where is the chunked body read?", [Hit(chunk=loop, row=0, score=1.0)], deps)
    prompt = chat.history[0]["messages"][0]["content"]
    assert citations[0].symbol == "HTTPResponse.read"
    assert "def read(self, amt=None):" in prompt  # the signature reached the model with the piece
    assert citations[0].line_start < loop.line_start <= loop.line_end <= citations[0].line_end
    off = Config.model_validate({"retrieval": {"stitch": False}})
    chat2 = FakeChat(["x [1]."])
    answer_from_context(
        "q",
        [Hit(chunk=loop, row=0, score=1.0)],
        Deps(config=off, retriever=None, index=index, llm=LLM(chat2), prompts=PromptRenderer()),
    )
    assert "def read(self" not in chat2.history[0]["messages"][0]["content"]  # retrieval.stitch = false: as found


def test_symbol_table_finds_named_definitions():
    chunks = chunks_of("http/client.py") + chunks_of("asyncio/tasks.py")
    table = SymbolTable.from_chunks(enumerate(chunks))
    found = table.lookup("HTTPResponse._read_chunked")
    assert found and found[0].name == "HTTPResponse._read_chunked" and found[0].kind == "method"
    assert "def _read_chunked" in chunks[found[0].row].text
    assert table.lookup("where is wait_for defined?")[0].name == "wait_for"
    assert table.lookup("`HTTPConnection`")[0].kind == "class"
    assert table.lookup("how do I read a body") == []  # plain words name nothing
    assert named_identifiers("what does re.search return?") == ["re.search"]
    assert {"function", "method", "class"} <= {d.kind for d in table.definitions}
    with pytest.raises(ValueError, match="symbol_kind"):
        Where(symbol_kind="module")
    with pytest.raises(Exception, match="Milvus"):
        Where(symbol_kind="class").milvus_expr()


def test_same_label_citations_merge_into_one():
    cites = [
        Citation(number=1, chunk_id="p#1", source="https://d/functools.html", symbol="#module-functools"),
        Citation(number=2, chunk_id="p#2", source="https://d/functools.html", symbol="#module-functools"),
        Citation(number=3, chunk_id="q#0", source="https://d/re.html", symbol="#re.search"),
        Citation(number=4, chunk_id="p#3", source="https://d/functools.html", symbol="#module-functools"),
    ]
    text, merged = merge_same_label("Use lru_cache [1][2] or search [3] [4].", cites)
    assert [c.number for c in merged] == [1, 2] and merged[0].merged == ["p#2", "p#3"]
    assert text == "Use lru_cache [1] or search [2] [1]."
    same, unchanged = merge_same_label("a [1] b [2]", cites[1:3])
    assert (same, [c.number for c in unchanged]) == ("a [1] b [2]", [2, 3])  # nothing to merge: untouched
