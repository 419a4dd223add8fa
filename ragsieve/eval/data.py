"""The datasets `ragsieve eval` reads: BEIR-layout folders, plus an optional `qa.jsonl`
with gold answers (SQuAD-style `answers`, `is_impossible`), and the seeded question sample."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragsieve.agent.errors import UsageError
from ragsieve.tools.datasets.beir import read_jsonl, read_qrels, read_queries


class Question(BaseModel):
    qid: str
    text: str
    qrels: dict[str, float] = {}
    answers: list[str] | None = None  # None: no gold answers for this question
    impossible: bool = False


class Dataset(BaseModel):
    folder: str
    corpus: str
    split: str
    fingerprint: str
    has_answers: bool
    questions: list[Question]
    skipped: int = 0  # qrels questions with no text in queries.jsonl or qa.jsonl

    def describe(self, sample: list[Question]) -> dict[str, Any]:
        return self.model_dump(exclude={"questions"}) | {
            "questions_total": len(self.questions),
            "evaluated": len(sample),
            "answerable": sum(q.answers is not None and not q.impossible for q in sample),
            "unanswerable": sum(q.impossible for q in sample),
            "with_qrels": sum(bool(q.qrels) for q in sample),
        }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()  # hashlib.file_digest is Python 3.11+
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_dataset(folder: str | Path, split: str = "test") -> Dataset:
    """A BEIR folder: `corpus.jsonl[.gz]`, `queries.jsonl`, `qrels/<split>.tsv` (header line
    first), optional `qa.jsonl` (`id, question, answers, is_impossible`). The questions are
    those judged in the split, plus the qa rows marked `is_impossible` (unanswerables
    have no qrels); answerable qa rows outside the split's qrels belong to another split."""
    root = Path(folder)
    corpus = next((root / n for n in ("corpus.jsonl", "corpus.jsonl.gz") if (root / n).is_file()), None)
    if corpus is None or not (root / "queries.jsonl").is_file():
        raise UsageError(f"{root} is not a BEIR folder: it needs corpus.jsonl[.gz] and queries.jsonl")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        raise UsageError(f"no qrels for split {split!r} in {root}/qrels (have: {', '.join(have) or 'none'})")
    qrels = read_qrels(qrels_path)
    texts = read_queries(root / "queries.jsonl")
    qa_path = root / "qa.jsonl"
    qa = {str(r["id"]): r for r in read_jsonl(qa_path)} if qa_path.is_file() else {}
    questions, skipped = [], 0
    ids = [i for i in texts if i in qrels] + [i for i in qrels if i not in texts]
    ids += [i for i, r in qa.items() if i not in qrels and r.get("is_impossible")]
    for qid in ids:
        row = qa.get(qid)
        text = texts.get(qid) or (row or {}).get("question")
        if not text:
            skipped += 1
            continue
        questions.append(
            Question(
                qid=qid,
                text=text,
                qrels=qrels.get(qid, {}),
                answers=_answers(qa_path, qid, row) if row else None,
                impossible=bool(row and row.get("is_impossible")),
            )
        )
    if not questions:
        raise UsageError(f"{root}: no question of split {split!r} has a text in queries.jsonl or qa.jsonl")
    digest = hashlib.sha256()
    for path in [corpus, root / "queries.jsonl", qrels_path] + ([qa_path] if qa else []):
        digest.update(f"{path.name}:{_sha256(path)}\n".encode())
    return Dataset(
        folder=str(root),
        corpus=str(corpus),
        split=split,
        fingerprint=digest.hexdigest(),
        has_answers=bool(qa),
        questions=questions,
        skipped=skipped,
    )


def _answers(path: Path, qid: str, row: dict) -> list[str]:
    """The row's gold answers: a list of strings (a bare string would be split into characters)."""
    answers = row.get("answers") or []
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise UsageError(
            f"{path}: question {qid!r}: 'answers' must be a list of strings, got {type(answers).__name__} {str(answers)[:80]!r}"
        )
    if not isinstance(row.get("is_impossible", False), bool):
        raise UsageError(f"{path}: question {qid!r}: 'is_impossible' must be true or false")
    return list(answers)


def sample_questions(questions: list[Question], limit: int | None, seed: int) -> list[Question]:
    """All questions in dataset order, or the first `limit` of a `seed`-shuffled order (so a
    larger limit with the same seed extends a smaller one: runs can grow and resume)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    order = sorted(questions, key=lambda q: q.qid)
    random.Random(seed).shuffle(order)
    return order[:limit]
