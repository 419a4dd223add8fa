"""FlashRank's real code path on a model file the test builds (issue 46, item 7).

No FlashRank model can be downloaded here, so the test writes one into a FlashRank cache folder: a
WordLevel tokenizer (`tokenizers`, with BERT's pair template: `[CLS] query [SEP] passage [SEP]`, type ids
0/1) and a tiny ONNX cross-encoder built with `onnx.helper` that takes FlashRank's inputs (`input_ids`,
`attention_mask`, `token_type_ids`, int64 [batch, seq]) and returns `logits` [batch, 1]: the number of
passage tokens equal to some query token (lexical overlap, a stand-in for the learned ms-marco weights).
`flashrank.Ranker` then runs unchanged - its file layout, tokenizer configuration, padding, ONNX Runtime
session and sigmoid scoring - under `ragsieve.tools.filters.rerank.Reranker` and the fallback step. The scores
are checked against the overlap computed here by hand, so a broken input feed or an order mix-up fails.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("flashrank")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from ragsieve.tools.filters.rerank import Reranker, RerankMethod  # noqa: E402
from ragsieve.tools.types import Chunk, Hit  # noqa: E402

MODEL = "ms-marco-TinyBERT-L-2-v2"  # the fallback's default name; the file name is FlashRank's own map
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORD = re.compile(r"\w+")


def _tokenizer(words: list[str]):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    vocab = {t: i for i, t in enumerate(SPECIALS + sorted(set(words)))}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tok, vocab


def _overlap_graph(sep_id: int):
    """logits[b] = #{passage tokens j (type 1, attended, not [SEP]) : ids[b, j] == ids[b, i] for a query token i
    (type 0, attended, not [CLS]/[SEP])}: Equal over the [B,S,1] x [B,1,S] grid, masked, any-reduced, summed."""
    n = helper.make_node
    f = TensorProto.FLOAT
    nodes = [
        n("Unsqueeze", ["input_ids", "ax2"], ["ids_col"]),  # [B,S,1]
        n("Unsqueeze", ["input_ids", "ax1"], ["ids_row"]),  # [B,1,S]
        n("Equal", ["ids_col", "ids_row"], ["same_b"]),
        n("Cast", ["same_b"], ["same"], to=f),  # [B,S,S]: token i equals token j
        n("Cast", ["attention_mask"], ["att"], to=f),
        n("Cast", ["token_type_ids"], ["typ"], to=f),
        n("Equal", ["input_ids", "sep"], ["is_sep_b"]),
        n("Cast", ["is_sep_b"], ["is_sep"], to=f),
        n("Sub", ["one", "is_sep"], ["not_sep"]),
        n("Mul", ["att", "not_sep"], ["att_words"]),
        n("Mul", ["att_words", "typ"], ["passage"]),  # passage words
        n("Sub", ["one", "typ"], ["first_seg"]),
        n("Mul", ["att_words", "first_seg"], ["query_all"]),
        n("Equal", ["input_ids", "cls"], ["is_cls_b"]),
        n("Cast", ["is_cls_b"], ["is_cls"], to=f),
        n("Sub", ["one", "is_cls"], ["not_cls"]),
        n("Mul", ["query_all", "not_cls"], ["query"]),  # query words
        n("Unsqueeze", ["query", "ax1"], ["q_row"]),  # [B,1,S] over i
        n("Mul", ["same", "q_row"], ["hit_q"]),  # [B,S(j),S(i)]
        n("ReduceMax", ["hit_q", "ax2"], ["matches_any"], keepdims=0),  # [B,S(j)]
        n("Mul", ["matches_any", "passage"], ["scored"]),
        n("ReduceSum", ["scored", "ax1"], ["logits"], keepdims=1),  # [B,1]
    ]
    inits = [
        helper.make_tensor("ax1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("ax2", TensorProto.INT64, [1], [2]),
        helper.make_tensor("one", f, [], [1.0]),
        helper.make_tensor("sep", TensorProto.INT64, [], [sep_id]),
        helper.make_tensor("cls", TensorProto.INT64, [], [SPECIALS.index("[CLS]")]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", f, ["batch", 1])
    graph = helper.make_graph(nodes, "overlap_cross_encoder", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_flashrank_model(cache: Path, words: list[str]) -> Path:
    """A FlashRank cache folder holding MODEL: the ONNX file FlashRank's map names and its tokenizer files."""
    from flashrank.Config import model_file_map

    folder = cache / MODEL
    folder.mkdir(parents=True)
    tok, vocab = _tokenizer(words)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"pad_token_id": vocab["[PAD]"]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512, "pad_token": "[PAD]"}))
    (folder / "special_tokens_map.json").write_text(
        json.dumps({"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"})
    )
    onnx.save(_overlap_graph(vocab["[SEP]"]), str(folder / model_file_map[MODEL]))
    return folder


QUERY = "rotate the api key"
TEXTS = [
    "cats sleep a lot in the sun",
    "rotate the api key daily and the old key expires",
    "dogs bark at night",
    "an api key is a secret",
]


def _hits():
    # embedding order (dense_score) deliberately differs from the overlap order
    dense = [0.9, 0.1, 0.8, 0.5]
    return [
        Hit(chunk=Chunk(doc_id=f"d{i}", chunk_index=0, text=t, source="s"), row=i, score=1.0, rank=i + 1, dense_score=d)
        for i, (t, d) in enumerate(zip(TEXTS, dense))
    ]


def _expected(query: str, text: str) -> float:
    q = set(WORD.findall(query.lower()))
    overlap = sum(1 for w in WORD.findall(text.lower()) if w in q)
    return 1 / (1 + math.exp(-overlap))


def test_flashrank_runs_a_built_onnx_cross_encoder_and_orders_by_its_scores(tmp_path):
    build_flashrank_model(tmp_path, WORD.findall(" ".join([QUERY, *TEXTS]).lower()))
    result = Reranker(MODEL, cache_dir=tmp_path).run(QUERY, _hits())
    assert result.method is RerankMethod.FLASHRANK, result.note
    ordered = [h.chunk_id for h in result.hits]
    expected = sorted(range(len(TEXTS)), key=lambda i: -_expected(QUERY, TEXTS[i]))
    assert ordered == [f"d{i}#0" for i in expected] and ordered[0] == "d1#0"  # not the embedding order (d0 first)
    for hit in result.hits:  # FlashRank's sigmoid of the model's logit, the overlap counted by hand
        i = int(hit.chunk_id[1])
        assert hit.extra["rerank_score"] == pytest.approx(_expected(QUERY, TEXTS[i]), rel=1e-5)


def test_the_fallback_step_reranks_with_the_built_flashrank_model(tmp_path):
    """The fallback's lenient reranker (no [rerank] provider) finds the cached model through
    `fallback.rerank_cache_dir` and reports FlashRank, not the embedding order."""
    from ragsieve.agent.core.state import RunState
    from ragsieve.agent.plan.plans import STEPS
    from ragsieve.testing import FakeChat
    from tests.support.loop_fakes import FakeRetriever, Script, VecIndex, make_deps

    docs = {"main": ["beta system overview"], **{f"s{i}": [t] for i, t in enumerate(TEXTS)}}
    words = WORD.findall(" ".join([QUERY, *[t for v in docs.values() for t in v]]).lower())
    build_flashrank_model(tmp_path / "cache", words)
    deps = make_deps(docs, FakeChat(default=Script(judge=lambda q, t: "expires" in t)), sparse_rows=[1, 2, 3, 4])
    deps.index = VecIndex(docs, sparse_rows=[1, 2, 3, 4])
    deps.retriever = FakeRetriever(deps.index)
    deps.config.fallback = deps.config.fallback.model_copy(update={"rerank_cache_dir": str(tmp_path / "cache")})
    state = RunState(question=QUERY, plan="t")
    summary = STEPS["fallback"]().run(state, deps).summary
    assert summary["rerank"] == "flashrank" and summary["rerank_note"] == f"flashrank {MODEL}"
    expected = sorted(range(len(TEXTS)), key=lambda i: -_expected(QUERY, TEXTS[i]))
    assert summary["candidates"] == [f"s{i}#0" for i in expected]
    assert summary["added"] == ["s1#0"]  # the judge (no earlier round) accepted only the expiring-key chunk
