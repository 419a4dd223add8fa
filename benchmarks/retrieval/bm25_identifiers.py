"""Does keeping identifiers whole cost prose retrieval anything? BM25 alone on SciFact (title + text, the
default k1 0.9 / b 0.4 with stems), plain tokenizer vs identifier terms vs identifier terms with documents'
lower-case compounds split into words (`compounds`, the default of new indexes)
-> benchmarks/results/bm25-identifiers.json.

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.bm25_identifiers
"""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import bench_io  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "scifact"


def main() -> int:
    from ragsieve.tools.index.search.bm25 import BM25Index
    from ragsieve.tools.metrics import ndcg_at_k, recall_at_k

    docs = [json.loads(line) for line in gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8")]
    ids = [d["_id"] for d in docs]
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(DATA / "queries.jsonl", encoding="utf-8"))}
    result = {
        **bench_io.header(),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, text=True, capture_output=True).stdout.strip(),
        "data": "SciFact (BEIR), BM25 only, title + text",
        "splits": {},
    }
    for split in ("test", "train"):
        qrels: dict[str, dict[str, int]] = {}
        with open(DATA / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
        out = {"queries": len(qrels)}
        for label, identifiers, compounds in (
            ("plain", False, False),
            ("identifiers", True, False),
            ("identifiers_compounds", True, True),
        ):
            started = time.perf_counter()
            index = BM25Index(identifiers=identifiers, compounds=compounds).build(texts)
            ndcg, recall = [], []
            for qid, rels in qrels.items():
                ranked = [ids[r] for r, _ in index.search(queries[qid], 100)]
                ndcg.append(ndcg_at_k(ranked, rels, 10))
                recall.append(recall_at_k(ranked, rels, 100))
            out[label] = {
                "ndcg@10": round(sum(ndcg) / len(ndcg), 4),
                "recall@100": round(sum(recall) / len(recall), 4),
                "seconds": round(time.perf_counter() - started, 1),
            }
        result["splits"][split] = out
        print(split, json.dumps(out), flush=True)
    return bench_io.write(result, REPO / "benchmarks" / "results" / "bm25-identifiers.json")


if __name__ == "__main__":
    sys.exit(main())
