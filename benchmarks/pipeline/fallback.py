"""The sparse fallback measured: questions whose gold chunk lies in the sparse subset S.

    .venv/bin/python -m benchmarks.pipeline.fallback [--sets squad2,hotpotqa,scifact] [--index-root DIR]

S is the index's sparse subset (COS-Mix: chunks whose nearest other chunk is less similar than
the corpus's `index.sparse_percentile`-th percentile). For every answerable question with a gold
chunk in S (SQuAD 2.0 sample, all 103 HotpotQA questions, the 300 SciFact test claims):
- gold recall (any gold document) and an oracle reader's answer (a gold answer string in the
  context's text; SQuAD and HotpotQA) of the `fast` context (top_k) without and with the fallback's
  additions (the best `fallback.max_added` chunks of S outside the context, no judge, no reranker:
  FlashRank has no model offline here);
- the rank of the best gold chunk within S under three scores: OUR distance score
  cos(q,c) + w (1 - nearest-neighbour cos) (`tools.index.sparse.subset.cosmix_scores`; COS-Mix gives no
  formula), plain cosine over S, BM25 over S, and `step`: what the fallback step does offline (the best
  `sparse_candidates` by our score outside the context, re-ordered by cosine by the reranker's embedding
  fallback; not found when the gold chunk is not among them or is in the context): recall@max_added,
  recall@sparse_candidates, MRR.
No LLM is involved. Writes benchmarks/results/fallback.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from benchmarks.bench_io import commit, header, write  # noqa: E402
from benchmarks.pipeline.data import REPO, build_index, load_questions  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.agent.orchestrator import Orchestrator  # noqa: E402
from ragsieve.agent.steps.fallback import _nn_of_rows  # noqa: E402
from ragsieve.tools.index.embedders.device import default_encoder  # noqa: E402
from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402
from ragsieve.tools.index.sparse.subset import cosmix_scores  # noqa: E402
from ragsieve.tools.metrics import chunk_doc_id, mean  # noqa: E402


def rank_of_gold(scores: np.ndarray, gold_mask: np.ndarray) -> int:
    """1-based rank of the best gold row under `scores` (ties: stable order)."""
    order = np.argsort(-scores, kind="stable")
    return int(np.flatnonzero(gold_mask[order])[0]) + 1


def answer_in(texts: list[str], answers: list[str]) -> bool | None:
    if not answers:
        return None
    low = " ".join(texts).lower()
    return any(a and a.lower() in low for a in answers)


def run_set(name: str, args, embedder) -> dict:
    cfg = Config().fallback
    questions = [
        q for q in load_questions(name, squad_answerable=args.squad_answerable, squad_unanswerable=0, seed=args.seed) if q["gold"]
    ]
    index_dir = build_index(name, Path(args.index_root), embedder)
    with Orchestrator.open(index_dir, Config()) as orch:
        index = orch.index
        rows = np.asarray(sorted(index.sparse_rows), dtype=int)
        doc_of_row = np.asarray([index.store.get(int(r)).doc_id for r in rows])
        nn = _nn_of_rows(np.asarray(index.vectors, dtype=np.float32), rows.tolist())
        out_rows = []
        for q in questions:
            gold_mask = np.isin(doc_of_row, q["gold"])
            if not gold_mask.any():
                continue
            qvec = np.asarray(index.embed_query(q["question"]), dtype=np.float32)
            cos = np.asarray(index.vectors[rows], dtype=np.float32) @ qvec
            bm25 = np.asarray(index.bm25.scores(q["question"]), dtype=float)[rows]
            ours = cosmix_scores(cos, nn, cfg.distance_weight)
            fast = orch.retrieve(q["question"], top_k=Config().retrieval.top_k)
            have = {h.chunk_id for h in fast}
            # what the step does offline: the best `sparse_candidates` by our score outside the context, then
            # the reranker's embedding fallback orders them by cosine (FlashRank has no model here)
            candidates = [int(i) for i in np.argsort(-ours, kind="stable") if index.store.get(int(rows[i])).chunk_id not in have][
                : cfg.sparse_candidates
            ]
            pipeline = sorted(candidates, key=lambda i: -cos[i])
            added = [index.store.get(int(rows[i])) for i in pipeline[: cfg.max_added]]
            step = np.full(rows.size, -np.inf)
            step[pipeline] = np.arange(len(pipeline), 0, -1)
            before_docs = {chunk_doc_id(h.chunk_id) for h in fast}
            after_docs = before_docs | {c.doc_id for c in added}
            texts = [h.chunk.text for h in fast]
            out_rows.append(
                {
                    "qid": q["id"],
                    "gold_in_fast": float(bool(before_docs & set(q["gold"]))),
                    "gold_with_fallback": float(bool(after_docs & set(q["gold"]))),
                    "answer_in_fast": answer_in(texts, q["answers"]),
                    "answer_with_fallback": answer_in(texts + [c.text for c in added], q["answers"]),
                    "context_tokens_added": sum(len(c.text.split()) for c in added),
                    **{f"rank_{k}": rank_of_gold(s, gold_mask) for k, s in (("ours", ours), ("cosine", cos), ("bm25", bm25))},
                    "rank_step": rank_of_gold(step, gold_mask) if gold_mask[pipeline].any() else 10**9,
                }
            )
    summary = {
        "questions": len(questions),
        "sparse_rows": int(rows.size),
        "sparse_gold_questions": len(out_rows),
        "gold_recall_fast": mean(r["gold_in_fast"] for r in out_rows),
        "gold_recall_with_fallback": mean(r["gold_with_fallback"] for r in out_rows),
        "answer_fast": mean(None if r["answer_in_fast"] is None else float(r["answer_in_fast"]) for r in out_rows),
        "answer_with_fallback": mean(
            None if r["answer_with_fallback"] is None else float(r["answer_with_fallback"]) for r in out_rows
        ),
        "words_added": mean(r["context_tokens_added"] for r in out_rows),
    }
    for k in ("ours", "cosine", "bm25", "step"):
        ranks = [r[f"rank_{k}"] for r in out_rows]
        summary[k] = {
            f"recall@{cfg.max_added}": mean(float(x <= cfg.max_added) for x in ranks),
            f"recall@{cfg.sparse_candidates}": mean(float(x <= cfg.sparse_candidates) for x in ranks),
            "mrr": mean(1.0 / x for x in ranks),
        }
    print(name, json.dumps(summary), flush=True)
    return {"summary": summary, "rows": out_rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="squad2,hotpotqa,scifact")
    ap.add_argument("--squad-answerable", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-pipeline-index"))
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "fallback.json")
    args = ap.parse_args(argv)
    result = {
        **header(),
        "commit": commit(),
        "settings": Config().fallback.model_dump(),
        "reranker": "none ran: FlashRank has no model offline; its embedding fallback orders candidates by cosine",
        "sets": {},
    }
    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2", encoder=default_encoder())  # a new index: the shipped default
    started = time.time()
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        result["sets"][name] = run_set(name, args, embedder)
    result["seconds"] = round(time.time() - started, 1)
    return write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
