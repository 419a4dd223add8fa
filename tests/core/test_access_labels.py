"""Permission-aware retrieval on the local backend: labels, the filter inside retrieval, every pipeline path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsieve import Config, Orchestrator
from ragsieve.testing import FakeChat
from ragsieve.tools.access.explain import explain
from ragsieve.tools.access.front_matter import front_matter_access
from ragsieve.tools.access.labels import load, set_rules
from ragsieve.tools.access.principals import AccessDefault, may_read, principals
from ragsieve.tools.access.rules import AccessRules
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.engines.open import opened
from ragsieve.tools.index.local.generations import current_generation
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.query.retriever import HybridRetriever
from ragsieve.tools.index.search.where import Where
from tests.core.test_full_plan import fake_model
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, build_needle_index, leaks

FINANCE, BOB, ALICE = ("group:finance", "user:fin@example.com"), ("user:bob@example.com",), ("user:alice@example.com",)
NEEDLE = "corpus/finance/needle-budget.md"


@pytest.fixture(scope="module")
def needle_index(tmp_path_factory, embedder) -> Path:
    return build_needle_index(tmp_path_factory.mktemp("needle"), embedder)


def test_principals_rules_and_front_matter_parse_and_refuse():
    assert principals("group:Finance, user:Bob@x.org public") == ("group:finance", "public", "user:bob@x.org")
    for bad in ("admin", "user:", "role:x", "user:a b"):
        with pytest.raises(UsageError):
            principals([bad])
    assert may_read(("public",), ()) and may_read(("group:a",), ("group:a",)) and not may_read((), ("group:a",))
    rules = AccessRules.parse("docs/**  public\n# c\ndocs/hr/ group:hr\nhttps://x.org/p/ user:a\n")
    assert rules.decide("docs/hr/pay.md").readers == ("group:hr",)  # the last match wins
    assert rules.decide("docs/readme.md").readers == ("public",)
    assert rules.decide("https://x.org/p/1").readers == ("user:a",) and rules.decide("other.md") is None
    for bad in ("docs/**", "!docs/ public", "docs/ user:"):
        with pytest.raises(UsageError, match="line 1"):
            AccessRules.parse(bad)
    assert front_matter_access("---\naccess: [group:a, user:b]\n---\nx") == ("group:a", "user:b")
    assert front_matter_access("---\ntitle: t\naccess:\n  - group:a\n  - user:c\n---\nx") == ("group:a", "user:c")
    assert front_matter_access("# no front matter\naccess: group:a") is None


def test_a_top_k_is_k_readable_chunks_and_labels_come_from_rules_and_front_matter(needle_index):
    labels = load(needle_index)
    assert labels.decide(NEEDLE).readers == ("group:finance",)
    assert labels.decide("corpus/notes/alice.md") == labels.decide("corpus/notes/alice.md")
    assert labels.decide("corpus/notes/alice.md").origin == "front matter"
    with HybridIndex.open(needle_index) as index:
        open_hits = HybridRetriever(index).run(QUESTION, top_k=3)
        assert open_hits[0].chunk.source == NEEDLE  # unrestricted, the needle answers the question
        fin = HybridRetriever(index, where=Where(readers=FINANCE)).run(QUESTION, top_k=3)
        assert fin[0].chunk.source == NEEDLE
        bob = HybridRetriever(index, where=Where(readers=BOB)).run(QUESTION, top_k=3)
        assert len(bob) == 3 and NEEDLE not in {h.chunk.source for h in bob}  # k readable, not k-1
        assert "corpus/notes/alice.md" not in {
            h.chunk.source for h in HybridRetriever(index, where=Where(readers=BOB)).run("parking space number", top_k=4)
        }
        alice = HybridRetriever(index, where=Where(readers=ALICE)).run("parking space number", top_k=4)
        assert alice[0].chunk.source == "corpus/notes/alice.md"


def test_changing_only_the_rules_relabels_without_a_new_generation(needle_index, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(needle_index, folder)
    gen = current_generation(folder)
    with HybridIndex.open(folder) as index:
        assert NEEDLE not in {h.chunk.source for h in HybridRetriever(index, where=Where(readers=BOB)).run(QUESTION, top_k=5)}
        set_rules(folder, AccessRules.parse("finance/ group:finance user:bob@example.com\n"))
        assert HybridRetriever(index, where=Where(readers=BOB)).run(QUESTION, top_k=5)[0].chunk.source == NEEDLE
        set_rules(folder, None, None, AccessDefault.DENY)  # no rules: only the front matter labels; rest denied
        assert {h.chunk.source for h in HybridRetriever(index, where=Where(readers=ALICE)).run(QUESTION, top_k=5)} == {
            "corpus/notes/alice.md"
        }
        assert HybridRetriever(index, where=Where(readers=BOB)).run(QUESTION, top_k=5) == []
    assert current_generation(folder) == gen
    with opened(folder) as index:
        assert explain(index, "user:bob@example.com", "corpus/handbook/holidays.md").origin == "default (deny)"


def test_explain_and_the_cli(needle_index):
    with opened(needle_index) as index:
        no = explain(index, "user:bob@example.com", NEEDLE)
        assert not no.allowed and "rules line 2" in no.text() and "may NOT read" in no.text()
        yes = explain(index, ["group:finance"], NEEDLE)
        assert yes.allowed and "granted to group:finance" in yes.text()
        with pytest.raises(UsageError, match="no document"):
            explain(index, "user:bob@example.com", "corpus/nothing.md")
    cli = [sys.executable, "-m", "ragsieve", "access", "explain", "--index", str(needle_index)]
    run = subprocess.run(
        cli + ["--as", "user:bob@example.com", NEEDLE],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert run.returncode == 1 and "may NOT read" in run.stdout, run.stderr


def _everything(answer) -> str:
    return answer.model_dump_json() if hasattr(answer, "model_dump_json") else json.dumps(answer, default=str)


@pytest.mark.parametrize("conformal_off", [False, True])
def test_every_pipeline_path_sees_only_readable_chunks(needle_index, conformal_off):
    config = Config()
    config.loop = config.loop.model_copy(update={"judge_decoys": 2})
    if conformal_off:
        config.segments = config.segments.model_copy(update={"enabled": False})
    for who, may in ((BOB, False), (FINANCE, True)):
        chat = FakeChat(default=fake_model)
        with Orchestrator.open(needle_index, config, chat=chat) as orch:
            answer = orch.ask(QUESTION, plan="full", where=Where(readers=who))
        sent = json.dumps([c["messages"] for c in chat.history])
        received = _everything(answer)
        if may:
            assert NEEDLE in {c.source for c in answer.citations} and NEEDLE_TEXT[:30] in sent
        else:
            assert leaks(sent) == [] and leaks(received) == [], (leaks(sent), leaks(received))
            assert not any("readers" in n for n in answer.notes)


def test_judge_decoys_come_only_from_readable_rows(needle_index):
    from ragsieve.agent.judging.checks import pick_decoys

    with HybridIndex.open(needle_index) as index:
        retriever = HybridRetriever(index, where=Where(readers=BOB))
        allowed = set(index.filter_rows(Where(readers=BOB)))
        everything = pick_decoys(index, "parking", set(), n=len(index))
        assert NEEDLE in {h.chunk.source for h in everything}  # unfiltered, the needle can be a decoy
        decoys = pick_decoys(index, "parking", set(), n=len(index), admit=retriever.admit)
        assert decoys and {h.row for h in decoys} <= allowed and NEEDLE not in {h.chunk.source for h in decoys}
