"""A group of unanswered questions written as an evaluation set `ragsieve eval` reads (BEIR layout + qa.jsonl).

Each question becomes a `qa.jsonl` row marked `is_impossible: true` (the index
cannot answer it today), so `ragsieve eval` reports its abstention rate on
them; once the owner adds the missing page and re-indexes, the same run shows
the questions answered (the rate falls). `queries.jsonl` holds the texts,
`qrels/test.tsv` the header only (the page that answers them does not exist
yet: add its id there to measure retrieval), `corpus.jsonl` the closest
documents the index has (so the folder is complete), `group.json` what was
exported. The folder is replaced atomically.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ragsieve.agent.errors import UsageError
from ragsieve.insights.analysis import doc_of
from ragsieve.insights.report import TopicGroup


def write_eval_set(group: TopicGroup, questions: dict[str, str], store: Any, out: str | Path, index: str) -> dict[str, int]:
    """Write `group` (its questions' texts by id in `questions`) to the folder `out`; `store` gives the
    closest documents' text. Returns counts."""
    texts = {qid: questions[qid] for qid in group.question_ids if qid in questions}
    if not texts:
        raise UsageError(f"group {group.id} has no question left to export")
    docs: dict[str, dict[str, str]] = {}
    for passage in group.closest:
        doc_id = doc_of(passage["chunk_id"])
        chunks = store.chunks_of(doc_id) if doc_id not in docs else []
        if chunks:
            docs[doc_id] = {"_id": doc_id, "title": chunks[0].title, "text": "\n".join(c.text for c in chunks)}
    if not docs:  # corpus.jsonl must not be empty: the label stands in as a placeholder document
        docs["insights-placeholder"] = {"_id": "insights-placeholder", "title": "", "text": group.label}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (tmp / "qrels").mkdir()
        _jsonl(tmp / "corpus.jsonl", docs.values())
        _jsonl(tmp / "queries.jsonl", ({"_id": q, "text": t} for q, t in texts.items()))
        _jsonl(tmp / "qa.jsonl", ({"id": q, "question": t, "answers": [], "is_impossible": True} for q, t in texts.items()))
        (tmp / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
        (tmp / EXPORT_MARK).write_text(
            json.dumps(
                {"index": index, "group": group.id, "label": group.label, "questions": len(texts), "closest": group.closest},
                ensure_ascii=False,
                indent=2,
            ),
            encoding="utf-8",
        )
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"questions": len(texts), "documents": len(docs)}


EXPORT_MARK = "group.json"  # what makes a folder an insights export (`ragsieve eval` then never builds an index)


def eval_command(out: str | Path, index_folder: str | Path, llm: Any) -> str:
    """The `ragsieve eval` command that measures the exported set against the served index as printed: its
    folder (absolute), and the LLM named (the served endpoint, else the embedded model it would start)."""
    parts = ["ragsieve", "eval", str(out), "--index", str(Path(index_folder).resolve())]
    llm = llm.resolved()
    if llm.base_url:
        parts += ["--base-url", llm.base_url] + (["--model", llm.model] if llm.model else [])
    else:
        parts += ["--local-model", llm.local_model]
    return shlex.join(parts)


def _jsonl(path: Path, rows: Iterable[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
