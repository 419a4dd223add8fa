"""Metadata filters (`Where`) and server-side fusion (Milvus `hybrid_search`), on both backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ragsieve import Config, Orchestrator
from ragsieve.testing import FakeChat
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.engines.open import open_index
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.index.search.where import Where

QUERY = "rotate the API key"


def test_where_parses_cli_items_and_refuses_bad_ones():
    assert Where.parse(None) is None and Where.parse([]) is None
    w = Where.parse(["path_prefix=examples/docs/", "language=Python", "kind=markdown"])
    assert (w.path_prefix, w.language, w.kind) == ("examples/docs/", "python", "markdown")
    for bad in (["colour=red"], ["path_prefix"], ["source="], ["language=klingon"], ["kind=a", "kind=b"]):
        with pytest.raises(UsageError):
            Where.parse(bad)
    assert Where(source='a"b').milvus_expr() == 'source == "a\\"b"'
    assert Where(path_prefix="docs/50%_x").milvus_expr() == 'source like "docs/50\\\\%\\\\_x%"'
    assert Where(language="go").milvus_expr() == '(source like "%.go")'


def test_local_filter_rows_match_the_chunk_metadata(examples_index):
    with HybridIndex.open(examples_index) as index:
        chunks = index.store.get_many(range(len(index)))
        prefix = chunks[0].source.rsplit("/", 1)[0] + "/"
        rows = index.filter_rows(Where(path_prefix=prefix))
        assert rows == [i for i, c in enumerate(chunks) if c.source.startswith(prefix)] and rows
        assert index.filter_rows(Where(tenant="someone-else")) == []
        assert index.filter_rows(Where(tenant="default")) == list(range(len(index)))
        py = index.filter_rows(Where(language="python"))
        assert py == [i for i, c in enumerate(chunks) if c.source.endswith(".py")]


def test_retriever_and_pipeline_search_only_what_the_filter_admits(examples_index):
    with HybridIndex.open(examples_index) as index:
        sources = sorted({c.source for c in index.store.get_many(range(len(index)))})
        unfiltered = HybridRetriever(index).run(QUERY, top_k=5)
        best = unfiltered[0].chunk.source
        other = next(s for s in sources if s != best)
        hits = HybridRetriever(index, where=Where(source=other)).run(QUERY, top_k=5)
        assert hits and {h.chunk.source for h in hits} == {other}
        assert HybridRetriever(index, where=Where(kind="no-such-kind")).run(QUERY, top_k=5) == []
    with Orchestrator.open(examples_index, Config(), chat=FakeChat(default="It says so [1].")) as orch:
        answer = orch.ask(QUERY, plan="full", where=Where(source=other))
        assert answer.context and {h.chunk.source for h in answer.context} == {other}
        assert {h.source for h in answer.citations} <= {other}
        assert any(n.startswith("searched only: source=") for n in answer.notes)


def test_cli_search_where(examples_index):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragsieve",
            "search",
            QUERY,
            "--index",
            str(examples_index),
            "--json",
            "--where",
            "kind=markdown",
            "--where",
            "path_prefix=examples/",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)["hits"]
    assert hits and all(h["source"].startswith("examples/") for h in hits)
    bad = subprocess.run(
        [sys.executable, "-m", "ragsieve", "search", QUERY, "--index", str(examples_index), "--where", "colour=red"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "--where takes FIELD=VALUE" in bad.stderr


def test_server_fusion_is_refused_where_it_cannot_be_applied(examples_index):
    with HybridIndex.open(examples_index) as index:
        with pytest.raises(UsageError, match="needs a backend that fuses"):
            HybridRetriever(index, fusion_site="server")
        with pytest.raises(UsageError, match="fusion site"):
            HybridRetriever(index, fusion_site="nowhere")


@pytest.fixture(scope="module")
def milvus_copy(examples_index, tmp_path_factory):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragsieve.tools.index.milvus.publish import publish

    folder = tmp_path_factory.mktemp("milvus-filters") / "idx"
    shutil.copytree(examples_index, folder)
    publish(folder, tenant="acme")
    return folder


def test_milvus_filters_evaluate_server_side_like_local(examples_index, milvus_copy):
    with HybridIndex.open(examples_index) as local, open_index(milvus_copy) as remote:
        chunks = local.store.get_many(range(len(local)))
        prefix = chunks[0].source.rsplit("/", 1)[0] + "/"
        for where in (
            Where(path_prefix=prefix),
            Where(kind="markdown"),
            Where(language="python"),
            Where(source=chunks[-1].source),
        ):
            assert remote.filter_rows(where) == local.filter_rows(where), where
        assert remote.filter_rows(Where(tenant="acme")) == list(range(len(remote)))
        assert remote.filter_rows(Where(tenant="default")) == []
        source = chunks[-1].source
        hits = HybridRetriever(remote, where=Where(source=source)).run(QUERY, top_k=3)
        assert hits and {h.chunk.source for h in hits} == {source}


def test_milvus_server_fusion_matches_client_rrf(milvus_copy):
    with open_index(milvus_copy) as remote:
        client = HybridRetriever(remote, fusion="rrf", fusion_site="client").run(QUERY, top_k=8)
        server_r = HybridRetriever(remote, fusion="rrf", fusion_site="server")
        server = server_r.run(QUERY, top_k=8)
        auto = HybridRetriever(remote, fusion="rrf").run(QUERY, top_k=8)
        assert [h.row for h in server] == [h.row for h in auto]
        assert server[0].bm25_rank is None and client[0].bm25_rank is not None  # fused by Milvus
        assert len({h.row for h in server[:5]} & {h.row for h in client[:5]}) >= 4
        assert [round(h.score, 6) for h in server[:3]] == [round(h.score, 6) for h in client[:3]]
        weighted = HybridRetriever(remote, fusion="weighted", fusion_site="server").run(QUERY, top_k=5)
        assert weighted and weighted[0].row in {h.row for h in client[:3]}
        with pytest.raises(UsageError, match="no per-list weights"):
            HybridRetriever(remote, fusion="rrf", fusion_site="server", bm25_weight=2.0)


def test_service_applies_the_where_filter_and_refuses_a_bad_one(examples_index):
    import httpx
    import openai

    from tests.support.service_fakes import ANSWER, served

    with HybridIndex.open(examples_index) as index:
        sources = sorted({c.source for c in index.store.get_many(range(len(index)))})
    md = [s for s in sources if s.endswith(".md")][-1]
    with served({"demo": examples_index}, FakeChat(default=ANSWER)) as svc:
        r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUERY, "where": {"source": md}}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["context"] and {cid.split("#")[0] for cid in r.json()["context"]} == {md}
        for bad in ({"colour": "red"}, {"language": "klingon"}, {"path_prefix": ""}, "docs/"):
            r = httpx.post(svc.base_url + "/v1/ask", json={"question": QUERY, "where": bad}, timeout=60)
            assert r.status_code == 400 and r.json()["error"]["param"].startswith("where"), (bad, r.text)
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": QUERY}], extra_body={"where": {"source": md}}
        )
        cited = reply.model_extra["ragsieve"]["citations"]
        assert cited and {c["source"] for c in cited} == {md}
