"""Rated answers as a dataset `ragsieve eval` reads (BEIR layout with a `qa.jsonl`).

- thumbs-up answers become questions: `queries.jsonl` (the standalone question
  that was searched), `qrels/test.tsv` (the documents the answer cited, grade 1:
  only citations whose `[n]` the answer's text contains, never the passages
  listed as retrieved and not cited) and `qa.jsonl` (the approved answer as the
  gold answer): a regression set. An abstention (the model's, no evidence,
  quoted passages, a strict replacement, a stop) is never a gold answer, and
  an answer that cites nothing gives no question: a rating of either is kept
  in `feedback.jsonl` only;
- `corpus.jsonl` holds the cited documents as the index holds them, so the
  folder is complete (`ragsieve eval` can also build its own index from it);
- `feedback.jsonl` keeps every rated answer whole (both ratings, comments,
  citations, trace, conversation): thumbs-down answers are there for review,
  not in the qrels (a wrong answer's citations are no relevance judgement).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ragsieve.agent.answer.also_retrieved import STOPPED
from ragsieve.agent.answer.answering import ABSTAIN, NO_EVIDENCE, PASSAGES_INTRO, is_abstention
from ragsieve.agent.answer.grounding import ABSTENTIONS, markers_in
from ragsieve.agent.errors import UsageError

_NO_ANSWER_HEADS = (ABSTAIN, NO_EVIDENCE, PASSAGES_INTRO, STOPPED)


def doc_of(chunk_id: str) -> str:
    return chunk_id.rpartition("#")[0] or chunk_id


def export(rated: list[dict], store, out: str | Path) -> dict[str, int]:
    """Write the dataset folder `out` (replaced atomically) from `rated` answers; `store` is the index's chunk
    store (documents by id). Returns counts."""
    if not rated:
        raise UsageError("no rated answer to export yet (thumbs up or down on the chat page or widget)")
    approved = [{**r, "citations": cited(r)} for r in rated if r["rating"] > 0 and not abstained(r)]
    approved = [r for r in approved if r["citations"]]
    docs: dict[str, dict] = {}
    for r in approved:
        for c in r["citations"]:
            doc_id = doc_of(c["chunk_id"])
            if doc_id not in docs:
                chunks = store.chunks_of(doc_id)
                if chunks:
                    docs[doc_id] = {"_id": doc_id, "title": chunks[0].title, "text": "\n".join(ch.text for ch in chunks)}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    (tmp / "qrels").mkdir()
    kept = [r for r in approved if any(doc_of(c["chunk_id"]) in docs for c in r["citations"])]
    _jsonl(tmp / "corpus.jsonl", docs.values())
    _jsonl(tmp / "queries.jsonl", ({"_id": r["id"], "text": r["question"]} for r in kept))
    _jsonl(
        tmp / "qa.jsonl",
        ({"id": r["id"], "question": r["question"], "answers": [r["answer"]], "is_impossible": False} for r in kept),
    )
    with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for r in kept:
            for doc_id in dict.fromkeys(doc_of(c["chunk_id"]) for c in r["citations"]):
                if doc_id in docs:
                    fh.write(f"{r['id']}\t{doc_id}\t1\n")
    _jsonl(tmp / "feedback.jsonl", rated)
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        import shutil

        shutil.rmtree(old)
    else:
        tmp.rename(out)
    return {
        "rated": len(rated),
        "questions": len(kept),
        "documents": len(docs),
        "thumbs_down": sum(r["rating"] < 0 for r in rated),
        "abstentions": sum(r["rating"] > 0 and abstained(r) for r in rated),
    }


def cited(record: dict) -> list[dict]:
    """The record's citations the answer cites: marked cited and with its `[n]` in the text."""
    present = markers_in(record.get("answer") or "")
    return [c for c in record["citations"] if c.get("cited", True) and c.get("number") in present]


def abstained(record: dict) -> bool:
    """The rated reply gave no answer: its answer step says so, or its text opens as every abstention does."""
    steps = [e for e in record.get("trace") or [] if e.get("step") == "answer"]
    if steps and (steps[-1].get("summary") or {}).get("abstention") in ABSTENTIONS:
        return True
    text = (record.get("answer") or "").lstrip()
    return is_abstention(text) or text.startswith(_NO_ANSWER_HEADS)


def _jsonl(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
