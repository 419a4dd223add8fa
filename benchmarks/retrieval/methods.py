"""Issue 60: first-stage methods chosen on SciFact's train claims -> benchmarks/results/retrieval_methods.json.

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.methods --index DIR   (a default build of SciFact)

On one index's vectors and BM25 (each query embedded once), every method is scored on SciFact's train qrels
(809 claims) and, beside it, on the test qrels (300 claims). A setting is chosen by its train nDCG@10 only; the
test figure says whether it also holds on held-out claims. The fusion here re-implements the retriever's client
path in numpy (BM25 and dense top `candidate_k` each, min-max over each list, a missing score counts 0, a
document at its best chunk); `base` reproduces the default retriever's 50/50 figure. Methods: the weight share
and the normalisation (min-max, z-score, max, mean +- 3 sd); document aggregation of chunk scores (each signal's
best chunk per document before fusing; best + gamma * second-best chunk); a document-centroid dense score as a
third list; the title repeated in BM25's text (field weighting); RM3-style pseudo-relevance feedback on BM25.
"""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks import bench_io

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[2]
MEASURES = ["tools/index/", "agent/config/index.py", "tools/metrics.py", "benchmarks/retrieval/methods.py"]


def topk(s: np.ndarray, k: int, positive: bool = False) -> np.ndarray:
    """Rows of the k highest scores, best first, ties by lower row (as `bm25.top_positive`)."""
    cand = np.flatnonzero(s > 0) if positive else np.arange(len(s))
    if cand.size > k:
        cand = cand[np.argpartition(-s[cand], k - 1)[:k]]
    return cand[np.lexsort((cand, -s[cand]))]


def norm(vals: np.ndarray, lst: np.ndarray, how: str) -> np.ndarray:
    if how == "minmax":
        lo, hi = lst.min(), lst.max()
        return (vals - lo) / (hi - lo) if hi > lo else np.ones_like(vals)
    if how == "zscore":
        sd = lst.std()
        return (vals - lst.mean()) / sd if sd > 0 else np.zeros_like(vals)
    if how == "max":
        return vals / lst.max()
    mu, sd = lst.mean(), lst.std()  # "dist": mean +- 3 sd to [0, 1]
    return np.clip((vals - mu + 3 * sd) / (6 * sd), 0, 1) if sd > 0 else np.ones_like(vals)


class Sweep:
    def __init__(self, index_dir: Path, data: Path, depth: int = 100):
        from ragsieve.tools.datasets.beir import read_qrels, read_queries
        from ragsieve.tools.index.local.index import HybridIndex

        self.idx = HybridIndex.open(index_dir)
        self.chunks = self.idx.store.get_many(range(len(self.idx)))
        self.docs = sorted({c.doc_id for c in self.chunks})
        pos = {d: i for i, d in enumerate(self.docs)}
        self.row_doc = np.array([pos[c.doc_id] for c in self.chunks])
        self.V = np.asarray(self.idx.vectors, dtype=np.float32)
        self.queries = read_queries(data / "queries.jsonl")
        self.split = {s: read_qrels(data / "qrels" / f"{s}.tsv") for s in ("train", "test")}
        self.qv = {q: self.idx.embed_query(self.queries[q]) for s in self.split.values() for q in s}
        total = np.zeros((len(self.docs), self.V.shape[1]), np.float32)
        np.add.at(total, self.row_doc, self.V)
        self.centroid = total / np.linalg.norm(total, axis=1, keepdims=True)
        self.depth, self._bm25, self._cache = depth, {}, {}

    def bm25(self, title_weight: int = 1):
        from ragsieve.tools.index.building.report import indexed_text
        from ragsieve.tools.index.search.bm25 import BM25Index

        if title_weight not in self._bm25:
            b = self.idx.bm25
            texts = [(c.title + "\n") * (title_weight - 1) + indexed_text(c) if c.title else indexed_text(c) for c in self.chunks]
            self._bm25[title_weight] = BM25Index(
                "bm25s", k1=b.k1, b=b.b, stem=b.stem, identifiers=b.identifiers, compounds=b.compounds
            ).build(texts, [c.kind for c in self.chunks])
        return self._bm25[title_weight]

    def bm25_scores(self, qid: str, title_weight: int = 1) -> np.ndarray:
        key = (qid, title_weight)
        if key not in self._cache:
            self._cache[key] = self.bm25(title_weight).scores(self.queries[qid]).astype(np.float32)
        return self._cache[key]

    def prf(self, qid: str, fb_docs: int, terms: int, alpha: float) -> np.ndarray:
        """RM3-style: the top `fb_docs` BM25 chunks' term distributions, weighted by score; the `terms` most likely
        terms added to the query with weight 1 - alpha (each term's BM25 scores summed with its weight)."""
        from ragsieve.tools.index.building.report import indexed_text
        from ragsieve.tools.index.search.bm25 import tokenize

        bm, b = self.bm25(), self.bm25_scores(qid)
        top = topk(b, fb_docs, positive=True)
        rel: Counter = Counter()
        for r, wt in zip(top.tolist(), (b[top] / b[top].sum()).tolist() if top.size else []):
            toks = tokenize(indexed_text(self.chunks[r]), bm.stem, bm.identifiers)
            for t, c in Counter(toks).items():
                rel[t] += wt * c / len(toks)
        expansion = rel.most_common(terms)
        total = sum(v for _, v in expansion) or 1.0
        out = alpha * b / max(1, len(tokenize(self.queries[qid], bm.stem, bm.identifiers)))
        for t, v in expansion:
            ids = bm._model.get_tokens_ids([t])
            if ids:
                out = out + (1 - alpha) * (v / total) * np.asarray(bm._model.get_scores_from_ids(ids), np.float32)
        return out

    def rank(
        self,
        qid: str,
        w: float = 0.5,
        how: str = "minmax",
        agg: str = "max",
        gamma: float = 0.0,
        wc: float = 0.0,
        title_weight: int = 1,
        prf: tuple | None = None,
        dense_only: bool = False,
        bm25_only: bool = False,
    ) -> list[int]:
        b = self.prf(qid, *prf) if prf else self.bm25_scores(qid, title_weight)
        d = self.V @ self.qv[qid]
        w = 1.0 if dense_only else 0.0 if bm25_only else w
        cb, cd = topk(b, self.depth, positive=True), topk(d, self.depth)
        union = np.union1d(cb, cd)
        if wc:
            cs = self.centroid @ self.qv[qid]
            cc = topk(cs, self.depth)
            union = np.union1d(union, np.flatnonzero(np.isin(self.row_doc, cc)))
        nb = norm(b[union], b[cb], how) if cb.size else np.zeros(union.size)
        nd = norm(d[union], d[cd], how)
        floor_b = 0.0 if how != "zscore" or not cb.size else nb[np.isin(union, cb)].min()
        floor_d = 0.0 if how != "zscore" else nd[np.isin(union, cd)].min()
        nb = np.where(np.isin(union, cb), nb, floor_b)
        nd = np.where(np.isin(union, cd), nd, floor_d)
        rd = self.row_doc[union]
        if agg == "signal":  # each signal's best chunk per document, then fused
            ud = np.unique(rd)
            pos = np.searchsorted(ud, rd)
            mb, md = np.full(ud.size, -np.inf), np.full(ud.size, -np.inf)
            np.maximum.at(mb, pos, nb)
            np.maximum.at(md, pos, nd)
            f = (1 - w) * mb + w * md
            return ud[np.lexsort((ud, -f))][:100].tolist()
        f = (1 - w) * nb + w * nd
        if wc:
            f = (1 - wc) * f + wc * np.where(np.isin(rd, cc), norm(cs[rd], cs[cc], how), 0.0)
        order = np.lexsort((union, -f))
        best: dict[int, float] = {}
        second: dict[int, float] = {}
        for doc, score in zip(rd[order].tolist(), f[order].tolist()):
            if doc not in best:
                best[doc] = score
            elif doc not in second:
                second[doc] = score
        total = {doc: s + gamma * second.get(doc, 0.0) for doc, s in best.items()}
        return sorted(total, key=lambda doc: -total[doc])[:100] if gamma else list(best)[:100]

    def score(self, split: str, **kw) -> dict:
        from ragsieve.tools.metrics import ndcg_at_k

        nd = [ndcg_at_k([self.docs[i] for i in self.rank(q, **kw)], rel) for q, rel in self.split[split].items()]
        return {"ndcg@10": round(float(np.mean(nd)), 4), "se": round(float(np.std(nd) / math.sqrt(len(nd))), 4)}


FAMILIES = {  # each family's candidates; `base` (the former default) is compared with each family's train choice
    "weights": [{"w": w} for w in (0.35, 0.4, 0.45, 0.5, 0.55)],
    "normalisation": [{"how": h, "w": 0.4} for h in ("zscore", "dist")],
    "document_aggregation": [{"agg": "signal", "w": 0.4}, {"gamma": 0.1, "w": 0.4}],
    "document_centroid": [{"wc": 0.15, "w": 0.4}],
    "bm25_title_weight": [{"title_weight": t, "w": 0.4} for t in (2, 3)],
    "bm25_prf": [{"prf": (5, 10, 0.7), "w": 0.4}],
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True, help="a default build of the SciFact corpus")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval_methods.json")
    args = ap.parse_args(argv)
    sweep = Sweep(args.index, args.data)
    result = bench_io.header(measures=MEASURES) | {
        "index": str(args.index),
        "embedding": sweep.idx.manifest["embedding"],
        "chunks": len(sweep.chunks),
        "documents": len(sweep.docs),
        "multi_chunk_documents": int((np.bincount(sweep.row_doc) > 1).sum()),
        "chosen_on": "SciFact train qrels (809 claims); test (300 claims) only reported",
        "queries": {s: len(q) for s, q in sweep.split.items()},
    }

    def both(kw: dict) -> dict:
        row = {
            "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()},
            "train": sweep.score("train", **kw),
            "test": sweep.score("test", **kw),
        }
        print(row, flush=True)
        return row

    result["single"] = {"bm25": both({"bm25_only": True}), "dense": both({"dense_only": True})}
    result["base"] = both({"w": 0.5})
    result["families"] = {}
    for family, candidates in FAMILIES.items():
        rows = [both(kw) for kw in candidates]
        chosen = max(rows, key=lambda r: r["train"]["ndcg@10"])
        reference = result["base"] if family == "weights" else result["families"]["weights"]["chosen"]
        result["families"][family] = {
            "candidates": rows,
            "chosen": chosen,
            "kept": chosen["train"]["ndcg@10"] > reference["train"]["ndcg@10"]
            and chosen["test"]["ndcg@10"] > reference["test"]["ndcg@10"],
        }
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
