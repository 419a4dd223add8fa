"""Permission-aware retrieval on the Milvus backend (milvus-lite): the caller's access as a Milvus filter
expression, the same rows as the local backend, and the needle test through the pipeline and the service."""

from __future__ import annotations

import json
import shutil

import anyio
import pytest

from ragsieve import Config, Orchestrator
from ragsieve.testing import FakeChat
from ragsieve.tools.index.engines.open import open_index
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.index.search.where import Where
from tests.core.test_full_plan import fake_model
from tests.service.test_access_service import BOB, FIN, everything_received, ring
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, build_needle_index, leaks

NEEDLE = "corpus/finance/needle-budget.md"
CALLERS = (("group:finance",), ("user:bob@example.com",), ("user:alice@example.com",), ())
pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, embedder):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragsieve.tools.index.milvus.publish import publish
    from tests.support.access_corpus import make_jwks

    root = tmp_path_factory.mktemp("needle-milvus")
    local = build_needle_index(root, embedder)
    remote = root / "milvus-index"
    shutil.copytree(local, remote)
    publish(remote)
    _, jwks = make_jwks(root)
    return local, remote, jwks


def test_milvus_access_filter_is_an_expression_admitting_the_local_rows(indexes):
    local, remote, _ = indexes
    assert Where(readers=("group:a",)).milvus_expr(["x/a.md", "y.md"]) == 'source in ["x/a.md", "y.md"]'
    assert Where(readers=("group:a",)).milvus_expr([]) == "false"
    with HybridIndex.open(local) as here, open_index(remote) as there:
        for who in CALLERS:
            assert there.filter_rows(Where(readers=who)) == here.filter_rows(Where(readers=who)), who
        bob = HybridRetriever(there, where=Where(readers=("user:bob@example.com",))).run(QUESTION, top_k=3)
        assert len(bob) == 3 and NEEDLE not in {h.chunk.source for h in bob}
        fin = HybridRetriever(there, where=Where(readers=("group:finance",))).run(QUESTION, top_k=3)
        assert fin[0].chunk.source == NEEDLE


def test_milvus_filters_resolve_from_the_publish_row_file_as_milvus_resolves_them(indexes):
    """The publish writes each row's source and kind beside the pointer; a filter is resolved from it with no
    read sent to Milvus (reading the rows back took ~20 s at 100k chunks on milvus-lite), to the rows Milvus
    itself admits (the path a pointer published before the file takes)."""
    from ragsieve.tools.index.milvus.client import thread_round_trips
    from ragsieve.tools.index.milvus.index import FILTER_CACHE_SIZE
    from ragsieve.tools.index.search.admitted import AdmittedCache

    _, remote, _ = indexes
    pointer = json.loads((remote / "milvus.json").read_text(encoding="utf-8"))
    assert (remote / pointer["meta_file"]).is_file()
    wheres = [Where(readers=who) for who in CALLERS] + [
        Where(readers=("group:finance",), path_prefix="corpus/"),
        Where(kind="markdown"),
        Where(tenant="default"),
    ]
    with open_index(remote) as there:
        before = thread_round_trips()
        by_file = [there.filter_rows(w) for w in wheres]
        sources = there.sources()
        assert thread_round_trips() == before  # nothing asked of the server
        assert there.admitted(wheres[0]).expr  # the dense search still gets the filter's own expression
        there.pointer = {k: v for k, v in there.pointer.items() if k != "meta_file"}  # as published before
        there._meta, there._meta_read, there._sources = None, False, None
        there._filter_cache = AdmittedCache(FILTER_CACHE_SIZE)
        by_server = [there.filter_rows(w) for w in wheres]
        assert thread_round_trips() > before
        assert by_file == by_server and there.sources() == sources
    assert by_file[0] and by_file[0] != by_file[1]  # finance reads the needle, bob does not


def test_row_metadata_file_round_trips_and_refuses_a_wrong_row_count(tmp_path):
    from ragsieve.tools.index.milvus.row_meta import write_row_metadata
    from ragsieve.tools.index.row_meta import RowMetadata

    rows = [(0, "a.md", "markdown"), (1, "a.md", "markdown"), (2, "b.py", "code"), (3, "c.md", "markdown")]
    name = write_row_metadata(tmp_path, "gen-000001", rows)
    meta = RowMetadata.load(tmp_path / name, 4)
    assert meta.sources == ["a.md", "b.py", "c.md"]
    asked: list[tuple[str, str]] = []

    def admits(source: str, kind: str) -> bool:
        asked.append((source, kind))
        return source != "b.py"

    assert meta.rows_where(admits).tolist() == [0, 1, 3]
    assert sorted(asked) == [("a.md", "markdown"), ("b.py", "code"), ("c.md", "markdown")]  # once per pair
    with pytest.raises(ValueError, match="lists 4 rows"):
        RowMetadata.load(tmp_path / name, 5)
    with pytest.raises(ValueError, match="in order"):
        write_row_metadata(tmp_path, "gen-000002", [(1, "a.md", "markdown")])


def test_milvus_pipeline_and_service_never_hand_the_needle_to_another_user(indexes, tmp_path):
    _, remote, jwks = indexes
    for who, may in ((("user:bob@example.com",), False), (("group:finance",), True)):
        chat = FakeChat(default=fake_model)
        with Orchestrator.open(remote, Config(), chat=chat) as orch:
            answer = orch.ask(QUESTION, plan="full", where=Where(readers=who))
        sent = json.dumps([c["messages"] for c in chat.history])
        if may:
            assert NEEDLE in {c.source for c in answer.citations} and NEEDLE_TEXT[:30] in sent
        else:
            assert leaks(sent + answer.model_dump_json()) == []
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    from tests.support.service_fakes import served

    with served({"needle": remote}, FakeChat(default=fake_model), keys=ring(jwks), data_dir=str(tmp_path / "data")) as svc:
        text, got = everything_received(svc, FIN)
        assert NEEDLE in {c["source"] for c in got["ask"]["citations"]} and NEEDLE_TEXT[:40] in text
        text, got = everything_received(svc, BOB)
        assert leaks(text) == [] and got["ask"]["citations"]

        async def read_as(key: str, ref: str = NEEDLE):
            async with streamablehttp_client(f"{svc.base_url}/mcp", headers={"Authorization": f"Bearer {key}"}) as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    return await session.call_tool("read", {"ref": ref})  # the source as cited, or its path's end

        assert NEEDLE_TEXT[:40] in anyio.run(read_as, FIN).content[0].text
        assert NEEDLE_TEXT[:40] in anyio.run(read_as, FIN, "needle-budget.md").content[0].text
        refused = anyio.run(read_as, BOB)
        assert refused.isError and leaks(refused.content[0].text.replace(NEEDLE, "")) == []
