"""Identifier-aware search on a real index (embedded MiniLM, hybrid retrieval) of CPython code and three Python
doc pages: a query naming a function finds its definition first, the README's own question finds
`HTTPResponse._read_chunked`, and `where symbol_kind` admits only chunks defining that kind."""

from __future__ import annotations

import gzip
import shutil
import sysconfig
from pathlib import Path

import pytest

from ragsieve.agent.config import Config
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.search.symbols import definitions_in
from ragsieve.tools.index.search.where import Where

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PAGES = Path(__file__).parents[1] / "fixtures" / "pydocs"


@pytest.fixture(scope="module")
def sources_index(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("sources")
    for rel in ("http/client.py", "asyncio/tasks.py"):
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(STDLIB / rel, root / "src" / rel)
    (root / "src" / "docs").mkdir()
    for name in ("re", "functools", "secrets"):
        (root / "src" / "docs" / f"{name}.html").write_text(
            gzip.open(PAGES / f"{name}.html.gz", "rt", encoding="utf-8").read(), encoding="utf-8"
        )
    IndexBuilder(root / "idx", embedder=embedder, progress=False).build([root / "src"])
    return root / "idx"


def test_named_definitions_rank_first(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        for query, where in (
            ("token_urlsafe", "#secrets.token_urlsafe"),
            ("re.search", "#re.search"),
            ("What does functools.lru_cache do?", "#functools.lru_cache"),
            ("HTTPResponse._read_chunked", "def _read_chunked"),
            ("how does wait_for cancel the task on timeout", "async def wait_for"),
        ):
            top = orch.retrieve(query, top_k=5)[0]
            assert where in (top.chunk.symbol + top.chunk.text), (query, top.chunk.symbol)
            assert top.extra.get("symbol") == 1.0
        off = Orchestrator.open(sources_index, Config.model_validate({"retrieval": {"symbols": False}}))
        with off:
            assert all(not h.extra.get("symbol") for h in off.retrieve("token_urlsafe", top_k=5))


def test_readme_question_finds_read_chunked(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        hits = orch.retrieve("where does http.client read a chunked response body?", top_k=5)
        assert any(h.chunk.symbol.endswith("HTTPResponse._read_chunked") for h in hits), [h.chunk.symbol for h in hits]


def test_where_symbol_kind_admits_only_defining_chunks(sources_index):
    with Orchestrator.open(sources_index, Config()) as orch:
        retriever = orch.retriever.with_filter(Where(symbol_kind="class"))
        hits = retriever.run("response", top_k=10)
        assert hits and all("class" in [k for _, k in definitions_in(h.chunk)] for h in hits)
        names = {n for h in hits for n, _ in definitions_in(h.chunk)}
        assert "HTTPResponse" in names


def _function_spans(rel: str) -> list[tuple[str, int, int]]:
    """Every function and method of a stdlib file, from Python's own parser (not the index's tree-sitter)."""
    import ast

    tree = ast.parse((STDLIB / rel).read_text(encoding="utf-8"))
    return [(n.name, n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _piece_of(hit, spans) -> tuple[str, int, int] | None:
    """The innermost function a code hit lies inside without being all of it (a piece of a split function)."""
    c = hit.chunk
    if c.kind != "code":
        return None
    inner = [
        s
        for s in spans.get(c.doc_id.split("src/", 1)[-1], [])
        if s[1] <= c.line_start and c.line_end <= s[2] and (c.line_start, c.line_end) != (s[1], s[2])
    ]
    return min(inner, key=lambda s: s[2] - s[1]) if inner else None


def test_one_hit_per_split_definition(sources_index):
    """`_send_request` is cut into three pieces that all match this question: without `collapse` they take three
    of the ten places; with it the best-ranked piece stays (stitching reads the function whole), the list is read
    further to keep ten different passages, and nothing else (no prose, no other function) leaves it."""
    spans = {rel: _function_spans(rel) for rel in ("http/client.py", "asyncio/tasks.py")}
    query = "send the request headers and body"
    off = Config.model_validate({"retrieval": {"collapse": False}})
    with Orchestrator.open(sources_index, off) as orch:
        every = orch.retrieve(query, top_k=40)
    pieces = [_piece_of(h, spans) for h in every[:10]]
    assert sum(1 for p in pieces if p and p[0] == "_send_request") >= 2, pieces
    with Orchestrator.open(sources_index, Config()) as orch:
        hits = orch.retrieve(query, top_k=10)
    assert len(hits) == 10 and [h.rank for h in hits] == list(range(1, 11))
    inside = [p for p in (_piece_of(h, spans) for h in hits) if p]
    assert len(inside) == len(set(inside)), inside  # at most one piece of any function
    order = [h.chunk_id for h in every]
    kept = [order.index(h.chunk_id) for h in hits]
    assert kept == sorted(kept)  # the fused order, with later pieces left out
    dropped = [h for h in every[: kept[-1] + 1] if h.chunk_id not in {x.chunk_id for x in hits}]
    assert dropped and all(_piece_of(h, spans) in inside for h in dropped)  # only pieces of kept functions left


def test_milvus_server_fusion_collapses_the_same_way(sources_index, tmp_path):
    """On Milvus with the server fusing (one `hybrid_search` request), the same rule holds: the list is asked for
    again, deeper, when pieces were left out, and the top ten are ten different passages."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragsieve.tools.index.milvus.publish import publish

    folder = tmp_path / "milvus-idx"
    shutil.copytree(sources_index, folder)
    publish(folder)
    spans = {rel: _function_spans(rel) for rel in ("http/client.py", "asyncio/tasks.py")}
    query = "send the request headers and body"
    server = {"fusion": "rrf", "fusion_site": "server", "bm25_weight": 0.5, "dense_weight": 0.5}  # Milvus RRF: equal
    with Orchestrator.open(folder, Config.model_validate({"retrieval": {**server, "collapse": False}})) as orch:
        every = orch.retrieve(query, top_k=30)
    assert sum(1 for h in every[:10] if (_piece_of(h, spans) or ("",))[0] == "_send_request") >= 2
    with Orchestrator.open(folder, Config.model_validate({"retrieval": server})) as orch:
        hits = orch.retrieve(query, top_k=10)
    inside = [p for p in (_piece_of(h, spans) for h in hits) if p]
    assert len(hits) == 10 and len(inside) == len(set(inside)), inside
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in every if h.chunk_id in {x.chunk_id for x in hits}]
