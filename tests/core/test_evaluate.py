"""`ragsieve eval` end to end on a tiny BEIR folder: FakeChat answers, the real MiniLM embedder."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ragsieve.agent.config import Config, PlanSpec
from ragsieve.agent.errors import UsageError
from ragsieve.eval.data import load_dataset, sample_questions
from ragsieve.eval.evaluate import Evaluation
from ragsieve.testing import FakeChat
from ragsieve.tools.metrics import ndcg_at_k

DOCS = {
    "d1": (
        "Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 for the World's Fair.",
    ),
    "d2": (
        "Photosynthesis",
        "Photosynthesis converts light energy into chemical energy in plants, using chlorophyll in the chloroplasts.",
    ),
    "d3": (
        "Mount Everest",
        "Mount Everest is Earth's highest mountain above sea level, in the Himalayas between Nepal and China. Its height is 8,849 metres.",
    ),
    "d4": (
        "Python (programming language)",
        "Python is a high-level programming language created by Guido van Rossum and first released in 1991.",
    ),
    "d5": (
        "Great Barrier Reef",
        "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland, Australia.",
    ),
    "d6": ("Penicillin", "Penicillin was discovered by Alexander Fleming in 1928 at St Mary's Hospital in London."),
    "d7": ("Amazon River", "The Amazon River in South America is the largest river by discharge volume of water in the world."),
    "d8": ("Jupiter", "Jupiter is the fifth planet from the Sun and the largest in the Solar System; it is a gas giant."),
}


# qid: (question, qrels, gold answers or None (no qa row), impossible, what the fake model replies)
QUESTIONS = {
    "q1": ("When was the Eiffel Tower completed?", {"d1": 1}, ["1889"], False, "It was completed in 1889 [1]."),
    "q2": ("Who created the Python programming language?", {"d4": 1}, ["Guido van Rossum"], False, "Guido van Rossum [1]."),
    "q3": ("Who discovered penicillin?", {"d6": 1}, ["Alexander Fleming"], False, "Alexander Fleming discovered it [1]."),
    "q4": ("How tall is Mount Everest?", {"d3": 2}, ["8,849 metres", "8849 m"], False, "8,849 metres [1]."),
    "q5": ("Which river has the largest discharge volume?", {"d7": 1}, None, False, "The Amazon River [1]."),
    "q6": (
        "Who painted the ceiling of the Great Barrier Reef lighthouse?",
        {},
        [],
        True,
        "The context does not contain the answer.",
    ),
}


BY_TEXT = {q[0]: q for q in QUESTIONS.values()}


_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)


def respond(messages):
    prompt = messages[-1]["content"]
    question = _QUESTION.search(prompt).group(1).strip()
    if prompt.startswith("You grade an answer"):
        return json.dumps({"correct": "1889" in prompt or "Rossum" in prompt, "reason": "compared"})
    return BY_TEXT[question][4]


def asked(chat: FakeChat) -> list[str]:
    return [_QUESTION.search(h["messages"][-1]["content"]).group(1).strip() for h in chat.history]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tinybeir")
    (root / "qrels").mkdir()
    with open(root / "corpus.jsonl", "w") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for qid, (text, qrels, *_rest) in QUESTIONS.items():
            if qrels:
                fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(root / "qrels" / "test.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, (_t, qrels, *_rest) in QUESTIONS.items():
            fh.writelines(f"{qid}\t{d}\t{g}\n" for d, g in qrels.items())
    with open(root / "qa.jsonl", "w") as fh:
        for qid, (text, _q, answers, impossible, _r) in QUESTIONS.items():
            if answers is not None:
                fh.write(json.dumps({"id": qid, "question": text, "answers": answers, "is_impossible": impossible}) + "\n")
    return root


@pytest.fixture(scope="module")
def index(dataset, embedder, tmp_path_factory) -> Path:
    from ragsieve.tools.index.building.builder import IndexBuilder

    folder = tmp_path_factory.mktemp("tinyindex")
    IndexBuilder(folder, embedder=embedder, progress=False).build([dataset / "corpus.jsonl"])
    return folder


def two_plans() -> Config:
    fast = PlanSpec(start="retrieve", transitions={"retrieve": {"next": "answer"}, "answer": {"next": "end"}})
    return Config(plans={"fast_copy": fast}, retrieval={"top_k": 2})


def test_load_dataset_and_sampling(dataset):
    ds = load_dataset(dataset)
    assert [q.qid for q in ds.questions] == ["q1", "q2", "q3", "q4", "q5", "q6"]  # unanswerable q6 has no qrels
    q4, q5, q6 = ds.questions[3:]
    assert q4.qrels == {"d3": 2} and q4.answers == ["8,849 metres", "8849 m"]
    assert q5.answers is None and q6.impossible and q6.answers == [] and q6.text.startswith("Who painted")
    assert load_dataset(dataset).fingerprint == ds.fingerprint
    small, large = sample_questions(ds.questions, 2, seed=7), sample_questions(ds.questions, 4, seed=7)
    assert [q.qid for q in large[:2]] == [q.qid for q in small]  # a larger limit extends a smaller one
    assert [q.qid for q in sample_questions(ds.questions, 4, seed=7)] == [q.qid for q in large]
    with pytest.raises(UsageError, match="have: test"):
        load_dataset(dataset, split="dev")


def test_eval_two_plans_resume_and_outputs(dataset, tmp_path):
    out, index_dir = tmp_path / "run", tmp_path / "idx"  # no index yet: the harness builds it
    plans = ["fast", "fast_copy"]
    first = FakeChat([respond] * 3 + [RuntimeError("interrupted")])
    with pytest.raises(RuntimeError, match="interrupted"):
        Evaluation(dataset, index_dir, plans=plans, config=two_plans(), out=out, chat=first, cache=False, progress=False).run()
    assert (index_dir / "CURRENT").is_file()
    assert len((out / "per_question.jsonl").read_text().splitlines()) == 3
    done = asked(first)[:3]

    second = FakeChat(default=respond)
    results = Evaluation(
        dataset,
        index_dir,
        plans=plans,
        config=two_plans(),
        out=out,
        chat=second,
        cache=False,
        progress=False,
        command="ragsieve eval tiny",
    ).run()
    # every (plan, question) answered exactly once over both sessions: 6 questions x 2 plans
    everything = done + asked(second)
    assert len(everything) == 12 and len(second.history) == 9
    assert all(everything.count(q[0]) == 2 for q in QUESTIONS.values())
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert sorted((r["plan"], r["qid"]) for r in rows) == sorted((p, q) for p in plans for q in QUESTIONS)

    for plan in plans:
        s = results["plans"][plan]
        assert s["questions"] == 6 and s["errors"] == 0
        # hand-computed from the scripted replies: F1 1/3, 1, 2/3, 1; EM 0, 1, 0, 1
        assert s["answers"]["f1"] == pytest.approx(0.75) and s["answers"]["n_f1"] == 4
        assert s["answers"]["em"] == pytest.approx(0.5)
        assert s["answers"]["abstain_correct"] == 1.0 and s["answers"]["false_abstain"] == 0.0
        assert s["retrieval"]["n_fs_ndcg@10"] == 5  # q6 has no qrels
        assert s["cost"]["calls"] == 1.0 and s["cost"]["n_context"] == 2.0
        assert s["cost"]["wall_p95_s"] >= s["cost"]["wall_p50_s"] > 0
    for row in rows:
        qrels = QUESTIONS[row["qid"]][1]
        if qrels:  # the row's figures are those of its own ranking; the one relevant doc is easy to find
            assert row["fs_ndcg@10"] == pytest.approx(ndcg_at_k(row["first_stage_top10"], qrels, 10))
            assert row["fs_mrr"] == 1.0 and row["gold_all"] == 1.0
            assert row["context_tokens"] > 0
    assert results["command"] == "ragsieve eval tiny" and results["dataset"]["unanswerable"] == 1
    assert results["index"]["corpus_fingerprint"] and results["versions"]["numpy"]
    head = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if head:  # a checkout (CI's clean clone is one): the result names the code that produced it
        assert results["commit"].split("+")[0] == head
    else:  # pragma: no cover - an installed wheel
        assert results["commit"] is None
    report = (out / "report.md").read_text()
    assert "| fast_copy |" in report and "context nDCG@10" in report and "Where the plans differ" in report
    for png in ("metric_per_plan.png", "cost_vs_quality.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "results.json").read_text())["plans"]["fast"]["answers"]["f1"] == pytest.approx(0.75)

    changed = two_plans().model_copy(update={"retrieval": two_plans().retrieval.model_copy(update={"top_k": 3})})
    with pytest.raises(UsageError, match=r"config\.retrieval\.top_k: was 2, now 3"):
        Evaluation(dataset, index_dir, plans=plans, config=changed, out=out, chat=FakeChat(), progress=False).run()


def test_cache_makes_a_rerun_free_and_judge_is_metered_apart(dataset, index, tmp_path):
    out = tmp_path / "run"
    first = FakeChat(default=respond)
    plans = ["fast", "fast_copy"]
    before = Evaluation(dataset, index, plans=plans, config=two_plans(), out=out, chat=first, judge=True, progress=False).run()
    # six answers, four judged (the answerable ones with gold answers); fast_copy's identical prompts are cache hits
    assert len(first.history) == 6 + 4
    fast, copy = before["plans"]["fast"]["cost"], before["plans"]["fast_copy"]["cost"]
    assert fast["cached_calls"] == 0.0 and copy["cached_calls"] == 1.0
    assert all(fast[k] == copy[k] for k in ("calls", "prompt_tokens", "completion_tokens", "judge_tokens"))
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    judged = {r["qid"]: r["judge_correct"] for r in rows if "judge_correct" in r and r["plan"] == "fast"}
    assert judged == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0}
    assert all(r["judge_calls"] == 1 for r in rows if "judge_correct" in r)
    assert all(r["calls"] == 1 for r in rows)  # the judge's call is not the plan's cost
    assert len(rows) == 12

    (out / "per_question.jsonl").unlink()
    second = FakeChat()  # no scripted reply: any real call would fail
    results = Evaluation(dataset, index, plans=plans, config=two_plans(), out=out, chat=second, judge=True, progress=False).run()
    assert second.history == []
    cost, cost_before = results["plans"]["fast"]["cost"], before["plans"]["fast"]["cost"]
    assert cost["cached_calls"] == 1.0 and cost_before["cached_calls"] == 0.0
    # cached replies still count at their token cost, so the figures do not change with the cache
    for key in ("calls", "prompt_tokens", "completion_tokens", "judge_calls", "judge_tokens"):
        assert cost[key] == cost_before[key] and cost[key] > 0
    assert results["plans"]["fast"]["answers"]["judge_correct"] == pytest.approx(0.5)


def test_retrieval_only_makes_no_llm_call(dataset, index, tmp_path, monkeypatch):
    from ragsieve.agent.llm import factory as llm_factory

    def refuse(*_a, **_k):
        raise AssertionError("retrieval-only opened an LLM")

    monkeypatch.setattr(llm_factory, "open_llm", refuse)
    chat = FakeChat()
    results = Evaluation(dataset, index, out=tmp_path / "r", retrieval_only=True, chat=chat, progress=False).run()
    assert chat.history == []
    s = results["plans"]["first_stage"]
    assert s["questions"] == 6 and s["retrieval"]["fs_mrr"] == 1.0 and "calls" not in s["cost"]
    assert s["answers"] == {}
    with pytest.raises(UsageError, match="drop --plan"):
        Evaluation(dataset, index, plans=["fast"], retrieval_only=True)
    with pytest.raises(UsageError, match="unknown plan"):
        Evaluation(dataset, index, plans=["nope"])


def test_cli_eval_retrieval_only(dataset, index, tmp_path):
    from ragsieve.cli.main import main

    out = tmp_path / "cli"
    code = main(["eval", str(dataset), "--index", str(index), "--retrieval-only", "--out", str(out), "--limit", "3"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["command"].startswith("ragsieve eval ") and "--retrieval-only" in results["command"]
    assert results["dataset"]["evaluated"] == 3
    assert main(["eval", str(dataset), "--index", str(index), "--judge", "--retrieval-only"]) == 2
    assert main(["eval", str(dataset), "--index", str(index), "--retrieval-only", "--model", "m"]) == 2


def test_configured_llm_gets_the_cache_inside_out_and_is_closed(dataset, index, tmp_path, monkeypatch):
    """Without `chat=`, the LLM comes from the config (ragsieve.agent.llm.factory), lazily, with <out>/llm-cache."""
    from ragsieve.agent.llm import factory as llm_factory
    from ragsieve.agent.llm.cache import DiskCache
    from ragsieve.agent.llm.client import LLM

    opened, closed, chat = [], [], FakeChat(default=respond)

    def fake_open(cfg):
        opened.append(cfg.cache_dir)
        return LLM(chat, cache=DiskCache(cfg.cache_dir)), lambda: closed.append(True)

    monkeypatch.setattr(llm_factory, "open_llm", fake_open)
    out = tmp_path / "run"
    results = Evaluation(dataset, index, plans=["fast"], out=out, limit=2, progress=False).run()
    assert opened == [str(out / "llm-cache")] and closed == [True]
    assert len(chat.history) == 2 and any((out / "llm-cache").rglob("*.json"))
    assert results["plans"]["fast"]["cost"]["calls"] == 1.0


def test_running_postfix_shows_running_means_per_plan():
    from ragsieve.eval.report import running_postfix

    rows = [
        {"plan": "fast", "f1": 1.0, "calls": 1},
        {"plan": "fast", "f1": 0.0, "calls": 1},
        {"plan": "agentic", "f1": 0.25, "calls": 3},
        {"plan": "agentic", "f1": None, "calls": 5},
        {"plan": "first_stage", "fs_ndcg@10": 0.5},
    ]
    assert (
        running_postfix(rows, ["fast", "agentic", "first_stage"])
        == "fast F1 0.500 1.0c | agentic F1 0.250 4.0c | first_stage nDCG@10 0.500"
    )
