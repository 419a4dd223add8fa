"""A saved calibration (agent.calibration.store): its file, the corpus and embedding it was made for, and
`ragsieve calibrate` writing it."""

from __future__ import annotations

import json
import math

import pytest

from ragsieve.agent.calibration import (
    CALIBRATION_FILE,
    Calibrator,
    load_calibration,
    save_calibration,
)
from ragsieve.agent.llm.templates import PromptRenderer
from tests.support.calibration_fakes import FACTS, TinyIndex, scripted_llm


@pytest.fixture
def index(tmp_path):
    return TinyIndex(tmp_path, FACTS)


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
    index.manifest["embedding"] = {
        "provider": "sentence-transformers",
        "model": index.model_name,
        "dimension": 384,
        "encoder": "torch",
    }
    llm, _ = scripted_llm()
    cal = Calibrator(index, llm=llm, prompts=PromptRenderer(), alpha=0.2, depth=6).run(questions=4)
    assert cal.models["embedding_identity"] == f"sentence-transformers:{index.model_name}:384"
    save_calibration(cal, index.root)
    same, warnings = load_calibration(tmp_path, None, index.manifest["embedding"])
    assert same is not None and warnings == []
    for changed, shown in (
        ({"provider": "openai", "model": "text-embedding-3-small", "dimension": 1536}, "openai:text-embedding-3-small:1536"),
        (index.manifest["embedding"] | {"encoder": "onnx-int8"}, ":384:int8"),
    ):
        stale, warnings = load_calibration(tmp_path, None, changed)
        assert stale is None and len(warnings) == 1
        assert shown in warnings[0] and "run `ragsieve calibrate` again" in warnings[0]
    old = cal.model_copy(update={"models": {"embedding": "some-older-model", "llm": ""}})  # before identities
    save_calibration(old, index.root)
    assert load_calibration(tmp_path, None, index.manifest["embedding"])[0] is None
    assert load_calibration(tmp_path, None, {"model": "some-older-model"})[0] is not None


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
    wanted = {
        "api-keys.md": "How do I rotate an API key?",
        "webhooks.md": "How are webhook payloads signed?",
        "rate-limits.html": "What happens when I exceed the rate limit?",
        "installation.md": "How do I install the Lumen client?",
    }
    queries, qrels = [], ["query-id\tcorpus-id\tscore"]
    for n, (name, text) in enumerate(wanted.items()):
        doc = next(d for d in docs if d.endswith(name))
        queries.append(json.dumps({"_id": f"q{n}", "text": text}))
        qrels.append(f"q{n}\t{doc}\t1")
    (tmp_path / "q.jsonl").write_text("\n".join(queries), encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("\n".join(qrels), encoding="utf-8")
    code = main(
        [
            "calibrate",
            "--index",
            str(folder),
            "--qrels",
            str(tmp_path / "qrels.tsv"),
            "--queries",
            str(tmp_path / "q.jsonl"),
            "--alpha",
            "0.3",
            "--json",
        ]
    )
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
