"""The calibrate workflow (agent.calibration) with FakeChat on a tiny in-memory index."""
from __future__ import annotations

import json
import math
import re
import zlib

import numpy as np
import pytest
from loop_fakes import fenced_text

from ragsieve.agent.calibration import (
    CALIBRATION_FILE,
    Calibrator,
    ContainsVerdict,
    GeneratedQA,
    format_report,
    load_calibration,
    read_qrels,
    save_calibration,
)
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.fake import FakeChat
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.tools.filters.conformal import ScoreKind, conformal_quantile, positive_scores
from ragsieve.tools.index.query.bm25 import BM25Index
from ragsieve.tools.types import Chunk

DIM = 64


def bow(text: str) -> np.ndarray:
    """Deterministic bag-of-words embedding (hashed, normalised)."""
    v = np.zeros(DIM)
    for word in re.findall(r"[a-z]+", text.lower()):
        v[zlib.crc32(word.encode()) % DIM] += 1.0
    n = np.linalg.norm(v)
    return v / n if n else v


class TinyStore:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks

    def count(self):
        return len(self.chunks)

    def get(self, row):
        return self.chunks[row]

    def get_many(self, rows):
        return [self.chunks[r] for r in rows]

    def doc_rows(self, doc_id):
        return [r for r, c in enumerate(self.chunks) if c.doc_id == doc_id]


class TinyIndex:
    """What the calibration, steps and benchmark use of HybridIndex, over bag-of-words vectors."""

    model_name = "bow-test"

    def __init__(self, root, texts_by_doc: dict[str, list[str]], fingerprint="fp-1", bm25=True):
        chunks = [Chunk(doc_id=d, chunk_index=i, text=t, source=d, title=d)
                  for d, texts in texts_by_doc.items() for i, t in enumerate(texts)]
        self.root = root
        self.manifest = {"corpus_fingerprint": fingerprint, "embedding": {"model": self.model_name}}
        self.store = TinyStore(chunks)
        self.vectors = np.stack([bow(c.text) for c in chunks]).astype(np.float32)
        # the real BM25 index over the chunk texts: the hybrid score kinds read its whole-corpus scores
        self.bm25 = BM25Index().build([c.text for c in chunks]) if bm25 else None

    def embed(self, texts):
        return np.stack([bow(t) for t in texts])

    def embed_query(self, text):
        return bow(text)


FACTS = {
    "alpha.md": ["The alpha reactor runs on molten salt and produces heat for the northern city of Norvik.",
                 "Alpha reactor maintenance happens every spring when the turbines are inspected by engineers from Norvik."],
    "beta.md": ["Beta bridges are painted orange because orange paint resists the coastal salt air best.",
                "The beta bridge toll is seven coins for carts and two coins for walkers crossing the river."],
    "gamma.md": ["Gamma gardens grow blue tulips that bloom only during the cold winter month of Frost.",
                 "Gamma gardeners water the blue tulips with rain collected in copper barrels on the garden roofs."],
}


def scripted_llm(contains_says=None, fixed_question=None):
    """FakeChat answering both calibration prompts from their text (the judge is truthful by default)."""

    def reply(messages):
        prompt = messages[-1]["content"]
        if "write ONE question" in prompt:
            passage = fenced_text(prompt)
            words = re.findall(r"[A-Za-z]+", passage)
            question = fixed_question or f"What about {' '.join(words[:6])}?"
            return json.dumps({"question": question, "answer": " ".join(words[4:8])})
        question = re.search(r"Question: (.*)", prompt).group(1)
        answer = re.search(r"Expected answer: (.*)", prompt).group(1)
        passage = fenced_text(prompt)
        verdict = answer.lower() in passage.lower() if contains_says is None else contains_says(question, passage)
        return json.dumps({"contains": verdict})

    chat = FakeChat(default=reply)
    return LLM(chat), chat


@pytest.fixture
def index(tmp_path):
    return TinyIndex(tmp_path, FACTS)


def test_prompts_render_and_schemas():
    r = PromptRenderer()
    assert r.variables("calibrate_question") == {"passage", "source"}
    assert r.variables("calibrate_contains") == {"question", "answer", "passage"}
    assert GeneratedQA.model_validate({"question": "What?", "answer": "x"}).answer == "x"
    assert ContainsVerdict.model_validate({"contains": False}).contains is False


def test_generated_calibration_records_and_report(index):
    llm, chat = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.origin == "generated" and len(cal.records) == 6
    assert cal.n_calibration + cal.n_heldout == 6 and cal.n_heldout == 3
    assert cal.n_not_found == 0 and cal.corpus_fingerprint == "fp-1"
    generated = [h for h in chat.history if h["schema_name"] == "GeneratedQA"]
    judged = [h for h in chat.history if h["schema_name"] == "ContainsVerdict"]
    assert len(generated) == 6
    for rec in cal.records:
        q = bow(rec.question)
        sims = index.vectors.astype(float) @ q
        order = list(np.argsort(-sims, kind="stable"))
        # the walk stops at the source chunk at the latest, and the recorded numbers are its own
        assert rec.found and rec.rank <= order.index(rec.source_row) + 1
        assert rec.similarity == pytest.approx(sims[rec.positive_row])
        assert rec.top1 == pytest.approx(sims.max())
        assert rec.rank == order.index(rec.positive_row) + 1
        assert rec.judge_calls == rec.rank - 1  # every chunk above the positive was judged, none below
    assert len(judged) == sum(r.judge_calls for r in cal.records)
    # thresholds come from the calibration split with the finite-sample rank
    arrays = cal.arrays("calibration")
    for kind in ScoreKind:
        expected = conformal_quantile(positive_scores(kind, **arrays), 0.2)
        assert cal.threshold(kind) == expected
    assert {k["kind"] for k in cal.report["kinds"]} == {k.value for k in ScoreKind}
    assert cal.score_kind in {k.value for k in ScoreKind}
    assert "coverage" in format_report(cal)


def test_not_found_questions_are_counted_not_dropped(index):
    # every question asks about the beta toll, whatever chunk it came from; the judge never agrees
    llm, _ = scripted_llm(contains_says=lambda q, p: False, fixed_question="beta bridge toll coins carts walkers")
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=1, seed=1).run(questions=6)
    missing = [r for r in cal.records if not r.found]
    assert len(cal.records) == 6 and cal.n_not_found == len(missing) > 0
    toll_row = index.store.doc_rows("beta.md")[1]
    for r in cal.records:
        if r.source_row == toll_row:  # its own source is the top chunk: found without asking the judge
            assert r.found and r.rank == 1 and r.judge_calls == 0
        else:  # source beyond depth 1, and the judge said no to the top chunk
            assert not r.found and r.judge_calls == 1 and r.positive_row is None and r.similarity is None
    assert any("no chunk containing the answer" in n for n in cal.report["notes"])
    scores = positive_scores(ScoreKind.RAW, **cal.arrays(None))
    assert int(np.isinf(scores).sum()) == len(missing)


def test_qrels_calibration_set(index, tmp_path):
    queries = tmp_path / "queries.jsonl"
    qrels = tmp_path / "qrels.tsv"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"_id": "q1", "text": "alpha reactor molten salt heat"},
        {"_id": "q2", "text": "beta bridge toll coins"},
        {"_id": "q3", "text": "gamma tulips bloom Frost"},
        {"_id": "q4", "text": "a question about a document that is not indexed"},
        {"_id": "q5", "text": "no qrels for me"},
    ]), encoding="utf-8")
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\talpha.md\t1\nq2\tbeta.md\t1\nq3\tgamma.md\t2\n"
                     "q4\tmissing.md\t1\nq3\tbeta.md\t0\n", encoding="utf-8")
    items = read_qrels(queries, qrels)
    assert sorted(i[0] for i in items) == ["q1", "q2", "q3", "q4"]
    cal = Calibrator(index, alpha=0.3, depth=6, seed=0).run(queries_path=queries, qrels_path=qrels)
    assert cal.origin == "qrels" and cal.n_not_found == 1
    by_id = {r.qid: r for r in cal.records}
    assert not by_id["q4"].found
    assert index.store.get(by_id["q1"].positive_row).doc_id == "alpha.md" and by_id["q1"].rank == 1
    assert index.store.get(by_id["q3"].positive_row).doc_id == "gamma.md"


def test_persist_and_fingerprint_warning(index, tmp_path):
    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6).run(questions=4)
    path = save_calibration(cal, index.root)
    assert path == tmp_path / CALIBRATION_FILE
    saved = json.loads(path.read_text())
    for key in ("alpha", "score_kind", "qhat", "n_calibration", "models", "corpus_fingerprint", "report", "records"):
        assert key in saved
    same, warnings = load_calibration(tmp_path, "fp-1")
    assert warnings == [] and same.records == cal.records
    _, warnings = load_calibration(tmp_path, "fp-2")
    assert len(warnings) == 1 and "corpus changed" in warnings[0]
    assert load_calibration(tmp_path / "nowhere", "x") == (None, [])


def test_a_changed_embedding_model_asks_to_calibrate_again(index, tmp_path):
    """The calibration records the embedding space; thresholds from another one are not applied."""
    index.manifest["embedding"] = {"provider": "sentence-transformers", "model": index.model_name, "dimension": 384,
                                   "encoder": "torch"}
    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6).run(questions=4)
    assert cal.models["embedding_identity"] == f"sentence-transformers:{index.model_name}:384"
    save_calibration(cal, index.root)
    same, warnings = load_calibration(tmp_path, None, index.manifest["embedding"])
    assert same is not None and warnings == []
    for changed, shown in (({"provider": "openai", "model": "text-embedding-3-small", "dimension": 1536},
                            "openai:text-embedding-3-small:1536"),
                           (index.manifest["embedding"] | {"encoder": "onnx-int8"}, ":384:int8")):
        stale, warnings = load_calibration(tmp_path, None, changed)
        assert stale is None and len(warnings) == 1
        assert shown in warnings[0] and "run `ragsieve calibrate` again" in warnings[0]
    old = cal.model_copy(update={"models": {"embedding": "some-older-model", "llm": ""}})  # before identities
    save_calibration(old, index.root)
    assert load_calibration(tmp_path, None, index.manifest["embedding"])[0] is None
    assert load_calibration(tmp_path, None, {"model": "some-older-model"})[0] is not None


def test_inputs_are_checked(index):
    llm, _ = scripted_llm()
    with pytest.raises(UsageError, match="alpha"):
        Calibrator(index, alpha=0.0)
    with pytest.raises(UsageError, match="questions"):
        Calibrator(index, llm=llm, prompts=PromptRenderer()).run(questions=1)
    with pytest.raises(UsageError, match="LLM"):
        Calibrator(index).run(questions=4)
    with pytest.raises(UsageError, match="score kind"):
        Calibrator(index, score_kind="best")


def test_cli_parser_has_calibrate():
    import argparse

    from ragsieve.cli.calibrate import add_parser, handler

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    args = parser.parse_args(["calibrate", "--index", "x", "--alpha", "0.05", "--questions", "30", "--score", "gap"])
    assert args.func is handler and args.alpha == 0.05 and args.questions == 30 and args.score == "gap"
    assert math.isclose(args.heldout, 0.5) and args.depth == 20


def test_calibrate_command_with_qrels(examples_index, tmp_path, capsys):
    import shutil

    from ragsieve.cli.main import main
    from ragsieve.tools.index.local.index import HybridIndex

    folder = tmp_path / "index"
    shutil.copytree(examples_index, folder)
    with HybridIndex.open(folder) as index:
        docs = list(index.store.documents())
    wanted = {"api-keys.md": "How do I rotate an API key?", "webhooks.md": "How are webhook payloads signed?",
              "rate-limits.html": "What happens when I exceed the rate limit?",
              "installation.md": "How do I install the Lumen client?"}
    queries, qrels = [], ["query-id\tcorpus-id\tscore"]
    for n, (name, text) in enumerate(wanted.items()):
        doc = next(d for d in docs if d.endswith(name))
        queries.append(json.dumps({"_id": f"q{n}", "text": text}))
        qrels.append(f"q{n}\t{doc}\t1")
    (tmp_path / "q.jsonl").write_text("\n".join(queries), encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("\n".join(qrels), encoding="utf-8")
    code = main(["calibrate", "--index", str(folder), "--qrels", str(tmp_path / "qrels.tsv"),
                 "--queries", str(tmp_path / "q.jsonl"), "--alpha", "0.3", "--json"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    saved = json.loads((folder / CALIBRATION_FILE).read_text())
    assert shown["score_kind"] == saved["score_kind"] and saved["origin"] == "qrels"
    assert saved["n_calibration"] + saved["n_heldout"] == 4 and saved["alpha"] == 0.3
    assert saved["models"]["embedding"] and saved["corpus_fingerprint"]
    # a real index has whole-corpus BM25: the hybrid kinds are calibrated beside the dense ones
    assert saved["hybrid_k"] == 60 and {"hybrid-rank", "hybrid-ratio"} <= set(saved["qhat"])
    assert all(r["hybrid_rank"] >= 1 and r["hybrid"] > 0 for r in saved["records"])
    assert main(["calibrate", "--index", str(folder), "--qrels", str(tmp_path / "qrels.tsv")]) == 2


def test_calibration_records_the_hybrid_signal_of_the_best_known_positive(index):
    from ragsieve.tools.filters.conformal import hybrid_signal, ranks_of

    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.hybrid_k == 60
    for rec in cal.records:
        h = hybrid_signal(index.vectors.astype(float) @ bow(rec.question), index.bm25.scores(rec.question), 60)
        # known positives: the source chunk and the chunk the walk found; the better by the hybrid signal
        known = {rec.source_row, rec.positive_row}
        assert rec.hybrid_row in known and h[rec.hybrid_row] == max(h[r] for r in known)
        assert rec.hybrid == pytest.approx(h[rec.hybrid_row]) and rec.hybrid_top1 == pytest.approx(h.max())
        assert rec.hybrid_rank == ranks_of(h)[rec.hybrid_row]
    assert {"hybrid-rank", "hybrid-ratio"} <= {k["kind"] for k in cal.report["kinds"]}


def test_without_bm25_scores_only_dense_kinds_and_forcing_hybrid_is_refused(tmp_path):
    plain = TinyIndex(tmp_path, FACTS, bm25=False)
    llm, _ = scripted_llm()
    cal = Calibrator(plain, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1).run(questions=6)
    assert cal.hybrid_k is None and all(r.hybrid is None for r in cal.records)
    assert {k["kind"] for k in cal.report["kinds"]} == {"raw", "gap", "ratio", "rank"}
    with pytest.raises(UsageError, match="calibrate again"):
        cal.threshold(ScoreKind.HYBRID_RANK)
    llm, _ = scripted_llm()
    with pytest.raises(UsageError, match="BM25"):
        Calibrator(plain, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6, seed=1,
                   score_kind="hybrid-rank").run(questions=6)
