"""Reranker providers and the `rerank` step: a tiny cross-encoder this test builds (real CrossEncoder path), a fake
/rerank server on loopback (Cohere and TEI shapes, faults), FlashRank refused offline, plans refused before any
call when the configured reranker cannot load, and the fallback using the same provider."""

from __future__ import annotations

import math

import pytest

from ragsieve.agent.config import Config, RerankConfig
from ragsieve.agent.core.summaries import RerankSummary
from ragsieve.agent.errors import UsageError
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.agent.plan.plans import get_plan, usable_plans
from ragsieve.testing import FakeChat
from ragsieve.tools.errors import ModelEndpointError, ModelUnavailableError
from ragsieve.tools.rerankers import RerankMethod, open_reranker, passage_text
from ragsieve.tools.rerankers.cross_encoder import CrossEncoderProvider
from ragsieve.tools.rerankers.http_rerank import HTTPRerankProvider
from ragsieve.tools.types import Chunk, Hit
from tests.support.model_endpoints import FakeRerank

WORDS = (
    "api key rotate rotation old new webhook signature header secret value lumen workspace the a of to is "
    "how do i what with and for in on expires grace period tea garden"
).split()


def build_tiny_cross_encoder(folder) -> None:
    """A randomly initialised one-layer BERT with one output (a cross-encoder's shape) and a WordPiece vocab."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz")]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def tiny_ce(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-cross-encoder") / "model"
    build_tiny_cross_encoder(folder)
    return folder


def reference_scores(folder, query: str, texts: list[str]) -> list[float]:
    """The same model run by transformers directly: sigmoid of the single logit (CrossEncoder's default)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        enc = tok([query] * len(texts), texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        return torch.sigmoid(model(**enc).logits[:, 0]).tolist()


def hits(texts):
    return [
        Hit(
            chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=t, source="s"), row=i, score=1.0 - i / 10, rank=i + 1, dense_score=0.5
        )
        for i, t in enumerate(texts)
    ]


TEXTS = ["the tea garden", "rotate the api key with lumen", "webhook signature header", "old key expires"]


def test_cross_encoder_from_a_local_folder_scores_like_the_model_itself(tiny_ce):
    reranker = open_reranker("cross-encoder", str(tiny_ce), max_length=128)
    result = reranker.run("how do i rotate the api key", hits(TEXTS))
    expected = reference_scores(tiny_ce, "how do i rotate the api key", TEXTS)
    order = sorted(range(4), key=lambda i: -expected[i])
    assert result.method is RerankMethod.CROSS_ENCODER and result.note == f"cross-encoder {tiny_ce} on cpu"
    assert [h.chunk.doc_id for h in result.hits] == [f"d{i}" for i in order]
    assert [h.rank for h in result.hits] == [1, 2, 3, 4]
    assert [h.extra["rank_before"] for h in result.hits] == [i + 1 for i in order]
    assert [h.extra["rerank_score"] for h in result.hits] == pytest.approx([expected[i] for i in order], abs=1e-5)
    assert open_reranker("cross-encoder", str(tiny_ce), max_length=128) is reranker  # loaded once


def test_a_cross_encoder_that_cannot_load_says_why(tmp_path):
    with pytest.raises(ModelUnavailableError, match="not in the Hugging Face cache; no download attempted"):
        CrossEncoderProvider("no-org/no-such-reranker").load()
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        CrossEncoderProvider(str(tmp_path / "missing")).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailableError, match=r"folder .*empty cannot be loaded"):
        CrossEncoderProvider(str(tmp_path / "empty")).load()


def test_flashrank_is_refused_cleanly_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="not cached at .*HF_HUB_OFFLINE is set"):
        open_reranker("flashrank", "ms-marco-TinyBERT-L-2-v2", cache_dir=str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(ModelUnavailableError, match=r"no download attempted \(set \[rerank\] allow_download"):
        open_reranker("flashrank", "ms-marco-TinyBERT-L-2-v2", cache_dir=str(tmp_path))
    config = Config(rerank=RerankConfig(provider="flashrank", cache_dir=str(tmp_path)))
    with pytest.raises(
        UsageError,
        match=r"plan 'fast\+rerank': step 'rerank' refuses its settings: the configured "
        r"reranker \(flashrank \) cannot load: FlashRank model",
    ):
        get_plan("fast+rerank", config)
    assert "fast+rerank" not in usable_plans(config) and "fast" in usable_plans(config)


@pytest.mark.parametrize("style", ["cohere", "tei"])
def test_http_rerank_endpoint_in_both_shapes(style):
    with FakeRerank(style=style) as server:
        provider = HTTPRerankProvider(server.root, "rr-model", style=style, batch_size=3, sleep=lambda s: None)
        result = open_reranker("http", "rr-model", base_url=server.root, style=style, batch_size=3).run(
            "rotate the api key", hits(TEXTS)
        )
        scores = provider.score("rotate the api key", TEXTS)
        sent = server.requests[0]["json"]
    assert result.method is RerankMethod.HTTP and result.note == f"http {server.root}/rerank (model rr-model)"
    assert result.hits[0].chunk.doc_id == "d1"  # "rotate the api key with lumen" shares the most words
    assert scores == pytest.approx([1 / 5, 4 / 5, 0.0, 1 / 5])  # input order, across two batches (3 + 1)
    if style == "cohere":
        assert sent == {"query": "rotate the api key", "documents": TEXTS[:3], "top_n": 3, "model": "rr-model"}
    else:
        assert sent == {"query": "rotate the api key", "texts": TEXTS[:3], "truncate": True}


def test_http_rerank_faults_are_retried_and_bad_replies_refused():
    with FakeRerank() as server:
        waits: list[float] = []
        provider = HTTPRerankProvider(server.root + "/rerank", max_attempts=3, sleep=waits.append)
        server.fault(503)
        server.fault(429, headers={"Retry-After": "1"})
        assert provider.score("q", ["a", "b"]) == [0.0, 0.0] and len(server.requests) == 3 and waits[1] == 1.0
        server.fault(200, {"results": [{"index": 0, "relevance_score": 0.5}]})
        with pytest.raises(ModelEndpointError, match="scored 1 of 2 passages"):
            provider.score("q", ["a", "b"])
        server.fault(200, {"results": [{"index": 5, "relevance_score": 0.5}, {"index": 0, "relevance_score": 1}]})
        with pytest.raises(ModelEndpointError, match="returned index 5 \\(of 2 passages\\)"):
            provider.score("q", ["a", "b"])
        server.fault(200, [{"index": 0, "score": "high"}])
        with pytest.raises(ModelEndpointError, match="malformed result"):
            provider.score("q", ["a"])
        server.fault(400, {"error": {"message": "model not found"}})
        with pytest.raises(ModelEndpointError, match="rejected the request: HTTP 400.*model not found"):
            provider.score("q", ["a"])
    with pytest.raises(UsageError, match="needs base_url"):
        RerankConfig(provider="http").options()


def test_fast_rerank_plan_reorders_the_pool_and_traces_ranks(examples_index, tiny_ce):
    config = Config(rerank=RerankConfig(provider="cross-encoder", model=str(tiny_ce), max_length=128, keep=3))
    chat = FakeChat(default="Rotate it [1].")
    with Orchestrator.open(examples_index, config, chat=chat) as orch:
        question = "How do I rotate the API key?"
        fast = orch.ask(question, plan="fast")
        ans = orch.ask(question, plan="fast+rerank")
    assert [e.step for e in ans.trace] == ["retrieve", "rerank", "answer"]
    summary = ans.trace[1].summary
    assert isinstance(summary, RerankSummary)
    assert summary.reranker == f"cross-encoder {tiny_ce} on cpu" and summary.provider == "cross-encoder"
    pool = [orch_hit for orch_hit in fast.first_stage[: config.retrieval.pool]]
    assert summary.scored == len(pool) == 20 and sorted(r.before for r in summary.ranks) == list(range(1, 21))
    assert [r.after for r in summary.ranks] == list(range(1, 21))
    # the new order is the cross-encoder's own order of the pool's passages
    texts = {}
    with Orchestrator.open(examples_index, Config()) as plain:
        for hit in plain.retrieve(question, top_k=20):
            texts[hit.chunk_id] = passage_text(hit)
    expected = reference_scores(tiny_ce, question, [texts[c] for c in pool])
    by_score = [c for _, c in sorted(zip(expected, pool), key=lambda p: -p[0])]
    assert [r.id for r in summary.ranks] == by_score
    assert [h.chunk_id for h in ans.context] == by_score[:3]  # rerank.keep
    assert ans.first_stage[:20] == by_score and ans.first_stage[20:] == fast.first_stage[20:]
    assert by_score != pool  # the step changed the order (a random model still disagrees with retrieval)
    assert all(math.isfinite(r.score) for r in summary.ranks)


def test_a_configured_reranker_that_cannot_load_refuses_the_plan_before_any_call(examples_index, tmp_path):
    config = Config(rerank=RerankConfig(provider="cross-encoder", model=str(tmp_path / "nowhere")))
    chat = FakeChat(default="never asked")
    with Orchestrator.open(examples_index, config, chat=chat) as orch:
        for plan in ("fast+rerank", "full", "agentic"):  # the fallback uses the same reranker: refused too
            with pytest.raises(UsageError, match=r"the configured reranker \(cross-encoder .*nowhere\) cannot load"):
                orch.ask("How do I rotate the API key?", plan=plan)
        assert orch.ask("How do I rotate the API key?", plan="fast").answer == "never asked"
    assert len(chat.history) == 1  # only the fast plan's answer call was made


def test_the_fallback_reranks_with_the_configured_provider(tmp_path):
    from tests.core.test_loop import FALLBACK_DOCS, FALLBACK_Q
    from tests.support.loop_fakes import Script, make_deps, run

    script = Script(judge=lambda q, t: "overview" in t or "secret" in t, validate=[False, True], answer="The value is 42 [1].")
    with FakeRerank() as server:
        deps = make_deps(FALLBACK_DOCS, FakeChat(default=script), sparse_rows=[2, 3], candidates=2, final_k=2, max_iterations=1)
        deps.config = deps.config.model_copy(update={"rerank": RerankConfig(provider="http", base_url=server.root)})
        state = run(deps, FALLBACK_Q)
        sent = server.requests[-1]["json"]
    fb = next(e for e in state.trace if e.step == "fallback").summary
    assert fb["rerank"] == "http" and fb["rerank_note"] == f"http {server.root}/rerank"
    assert sent["query"] == FALLBACK_Q and sorted(sent["documents"]) == sorted(FALLBACK_DOCS["noise"] + FALLBACK_DOCS["rare"])
    assert state.fallback.rerank == "http"


def test_full_rerank_plan_judges_the_reranked_pool(examples_index):
    """`full+rerank`: the judge is offered the pool in the reranker's order (a fake /rerank endpoint)."""
    from tests.core.test_full_plan import fake_model

    question = "How do I rotate the API key?"
    with FakeRerank() as server:
        config = Config(rerank=RerankConfig(provider="http", base_url=server.root))
        chat = FakeChat(default=fake_model)
        with Orchestrator.open(examples_index, config, chat=chat) as orch:
            ans = orch.ask(question, plan="full+rerank")
            order = [r["id"] for r in ans.trace[1].summary_dict()["ranks"]]
            text = {h.chunk_id: h.chunk.text for h in orch.retrieve(question, top_k=20)}
    steps = [e.step for e in ans.trace]
    assert steps[:3] == ["retrieve", "rerank", "judge"] and "answer" in steps
    assert ans.first_stage[: len(order)] == order and order != list(text)  # the reranker moved something
    # the judge was offered the pool in the reranker's order (the loop records the order it offered chunks in)
    assert ans.loop.discovered[: len(order)] == order
    assert any("mapping an index to the chunk's text" in h["messages"][0]["content"] for h in chat.history)
