"""Filter benchmark on SQuAD 2.0: conformal coverage (no LLM) and the GMM paper's Table-1 measures.

    .venv/bin/python benchmarks/filters.py --part conformal                   # seconds after the index exists
    .venv/bin/python benchmarks/filters.py --part gmm --limit 20 --types simple [--no-llm]

Conformal: the SQuAD qrels (gold paragraph = positive) are the calibration set, so no
LLM is needed. `--questions` questions are sampled per seed and split half calibration /
half held-out by `agent.calibration.Calibrator`; for alpha in {0.05, 0.1, 0.2} and each
nonconformity score: held-out coverage against 1-alpha (binomial tolerance 2 s.e.) and the
mean number of chunks kept, plus the fixed top-k reaching the same coverage.

GMM (Bulgakov 2024, Table 1): for each question the top NRD chunks by dense similarity are
filtered by `ragsieve.tools.filters.gmm` (config defaults: interaction, alpha 0.5, PCA [2,3], K [4,5,6],
percentile 15, min_outlier_freq 2). NRD = chunks retrieved; ANFD = mean chunks left after
filtering; AR = mean(left / NRD). Emb% and TFIDF% (eq. 14-15): the LLM answers from the
filtered chunks and from the same number of top chunks; each answer is compared with the
ground truth by MiniLM cosine and by TF-IDF cosine; % = (sum filtered - sum top) / sum top
* 100. Ground truth: the SQuAD answer for `simple`; the configured LLM's own answer to the
question it wrote for `broader` (from 3 paragraphs of one article) and `double` (two
broader questions from different articles joined). LLM-free extra: how often the gold
paragraph survives the filter vs is in the same number of top chunks (`simple`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from ragsieve.agent.calibration import Calibrator, GeneratedQA  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.agent.llm.templates import PromptRenderer  # noqa: E402
from ragsieve.agent.steps.outliers import build_filter  # noqa: E402
from ragsieve.tools.filters.conformal import binomial_tolerance  # noqa: E402
from ragsieve.tools.filters.gmm import plot_outliers  # noqa: E402
from ragsieve.tools.index.hybrid import HybridIndex  # noqa: E402
from ragsieve.tools.index.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.metrics import strip_citations, token_f1  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "squad2"


class CachedEmbeddings:
    """The index, with query embeddings memoised across alphas and seeds."""

    def __init__(self, index: HybridIndex):
        self._index, self._cache = index, {}

    def __getattr__(self, name):
        return getattr(self._index, name)

    def embed(self, texts):
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            self._cache.update(zip(todo, self._index.embed(todo)))
        return np.stack([self._cache[t] for t in texts])

    def embed_query(self, text):
        return self.embed([text])[0]


def conformal_part(index, args) -> dict:
    alphas = [float(a) for a in args.alphas.split(",")]
    cached = CachedEmbeddings(index)
    out: dict = {"questions_per_seed": args.questions, "seeds": args.seeds, "depth": args.depth, "alphas": {}}
    for alpha in alphas:
        runs = []
        for seed in range(args.seeds):
            cal = Calibrator(cached, alpha=alpha, depth=args.depth, seed=seed).run(
                questions=args.questions, queries_path=DATA / "queries.jsonl", qrels_path=DATA / "qrels" / "test.tsv")
            runs.append(cal)
        m = runs[0].n_heldout
        tol = binomial_tolerance(1 - alpha, m)
        kinds = {}
        for k in runs[0].report["kinds"]:
            name = k["kind"]
            per = [next(x for x in r.report["kinds"] if x["kind"] == name) for r in runs]
            covs = [p["coverage"] for p in per]
            kinds[name] = {"coverage_mean": round(float(np.mean(covs)), 4), "coverage_per_seed": covs,
                           "mean_kept": round(float(np.mean([p["mean_set_size"] for p in per])), 2),
                           "mean_within_tolerance": abs(float(np.mean(covs)) - (1 - alpha)) <= tol,
                           "seeds_within_tolerance": sum(abs(c - (1 - alpha)) <= tol for c in covs)}
        best = min(kinds, key=lambda n: kinds[n]["mean_kept"])
        out["alphas"][str(alpha)] = {
            "target": round(1 - alpha, 3), "n_calibration": runs[0].n_calibration, "n_heldout": m,
            "tolerance": round(tol, 4), "not_found_mean": float(np.mean([r.n_not_found for r in runs])),
            "chosen_per_seed": [r.score_kind for r in runs], "kinds": kinds,
            "fixed_top_k_at_equal_coverage": [r.report["fixed_top_k_at_equal_coverage"] for r in runs],
            "smallest_kind": best, "smallest_vs_raw": round(kinds[best]["mean_kept"] / kinds["raw"]["mean_kept"], 3)}
        print(f"alpha={alpha}: " + ", ".join(f"{n} cov {v['coverage_mean']:.3f} kept {v['mean_kept']:.1f}"
                                             for n, v in kinds.items()), flush=True)
    return out


def load_simple(limit: int, seed: int) -> list[dict]:
    rows = [json.loads(x) for x in (DATA / "qa.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    rows = [r for r in rows if not r["is_impossible"] and r["answers"]]
    random.Random(seed).shuffle(rows)
    return [{"type": "simple", "question": r["question"], "truth": r["answers"][0], "golds": r["answers"],
             "gold_doc": r["gold_doc_id"]} for r in rows[:limit]]


def load_generated(kind: str, limit: int, seed: int, llm, prompts) -> list[dict]:
    """broader: an LLM question + answer over 3 paragraphs of one article; double: two joined."""
    corpus = [json.loads(x) for x in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    by_title: dict[str, list[str]] = {}
    for d in corpus:
        by_title.setdefault(d["title"], []).append(d["text"])
    titles = sorted(by_title)
    random.Random(seed).shuffle(titles)
    need = limit * (2 if kind == "double" else 1)
    qas = []
    for title in titles[:need]:
        prompt = prompts.render("calibrate_question", passage="\n\n".join(by_title[title][:3]), source=title)
        qa = llm.structured([{"role": "user", "content": prompt}], GeneratedQA)
        qas.append((qa.question, qa.answer))
    if kind == "broader":
        return [{"type": kind, "question": q, "truth": a, "golds": [a]} for q, a in qas]
    pairs = zip(qas[0::2], qas[1::2])
    return [{"type": kind, "question": f"{q1} {q2}", "truth": f"{a1} {a2}", "golds": [f"{a1} {a2}"]}
            for (q1, a1), (q2, a2) in pairs]


def answer(llm, prompts, question: str, chunks, max_tokens: int) -> str:
    passages = [{"number": i, "source": c.source, "title": c.title, "text": c.text} for i, c in enumerate(chunks, 1)]
    prompt = prompts.render("answer", question=question, passages=passages,
                            abstain="The context does not contain the answer.")
    return strip_citations(llm.text([{"role": "user", "content": prompt}], max_tokens=max_tokens))


def tfidf_cosine(a: str, b: str) -> float:
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        m = TfidfVectorizer().fit_transform([a, b])
    except ValueError:  # empty vocabulary
        return 0.0
    return float((m[0] @ m[1].T).toarray()[0, 0])


def gmm_part(index, args, config: Config, llm, prompts) -> dict:
    flt = build_filter(config.outliers)
    out: dict = {"nrd": args.nrd, "filter": config.outliers.model_dump(), "types": {}}
    for kind in args.types.split(","):
        qs = load_simple(args.limit, args.seed) if kind == "simple" else load_generated(kind, args.limit, args.seed, llm, prompts)
        rows = []
        for i, q in enumerate(qs):
            qvec = index.embed_query(q["question"])
            sims = np.asarray(index.vectors, dtype=float) @ qvec
            top = [int(r) for r in np.argsort(-sims, kind="stable")[: args.nrd]]
            res = flt.run(np.asarray(index.vectors[top], dtype=float), qvec)
            kept = [r for r, o in zip(top, res.outliers) if not o]
            row = {"question": q["question"], "left": len(kept), "runs_completed": res.completed_runs}
            if kind == "simple":
                docs = lambda rows_: {index.store.get(r).doc_id for r in rows_}  # noqa: E731
                row["gold_in_filtered"] = q["gold_doc"] in docs(kept)
                row["gold_in_top_same_k"] = q["gold_doc"] in docs(top[: len(kept)])
            if args.plot and i == 0:
                row["plot"] = str(plot_outliers(index.vectors[top], qvec, res.outliers,
                                                Path(args.plot) / f"gmm-{kind}-q0.png", flt=flt, title=q["question"][:80]))
            if llm is not None and kept:
                a_filt = answer(llm, prompts, q["question"], index.store.get_many(kept), args.max_tokens)
                a_top = a_filt if len(kept) == len(top) else \
                    answer(llm, prompts, q["question"], index.store.get_many(top[: len(kept)]), args.max_tokens)
                e = index.embed([a_filt or " ", a_top or " ", q["truth"]])
                row.update(answer_filtered=a_filt, answer_top=a_top, truth=q["truth"],
                           emb_filtered=float(e[0] @ e[2]), emb_top=float(e[1] @ e[2]),
                           tfidf_filtered=tfidf_cosine(a_filt, q["truth"]), tfidf_top=tfidf_cosine(a_top, q["truth"]),
                           f1_filtered=token_f1(a_filt, q["golds"]), f1_top=token_f1(a_top, q["golds"]))
            rows.append(row)
            print(f"[{kind} {i + 1}/{len(qs)}] left {len(kept)}/{args.nrd}", flush=True)
        out["types"][kind] = {"summary": summarise(rows, args.nrd), "per_question": rows,
                              "ground_truth": "SQuAD answer" if kind == "simple" else "configured LLM"}
        print(json.dumps({kind: out["types"][kind]["summary"]}, indent=1), flush=True)
    return out


def summarise(rows: list[dict], nrd: int) -> dict:
    s: dict = {"questions": len(rows), "NRD": nrd, "ANFD": round(float(np.mean([r["left"] for r in rows])), 3),
               "AR": round(float(np.mean([r["left"] / nrd for r in rows])), 3)}
    if rows and "gold_in_filtered" in rows[0]:
        s["gold_kept_rate_filtered"] = round(float(np.mean([r["gold_in_filtered"] for r in rows])), 3)
        s["gold_kept_rate_top_same_k"] = round(float(np.mean([r["gold_in_top_same_k"] for r in rows])), 3)
    scored = [r for r in rows if "emb_filtered" in r]
    if scored:
        for m in ("emb", "tfidf"):
            f, t = sum(r[f"{m}_filtered"] for r in scored), sum(r[f"{m}_top"] for r in scored)
            s[f"{m.upper() if m == 'tfidf' else 'Emb'}%"] = round((f - t) / t * 100, 2) if t else None
        s["F1_filtered"] = round(float(np.mean([r["f1_filtered"] for r in scored])), 3)
        s["F1_top"] = round(float(np.mean([r["f1_top"] for r in scored])), 3)
        s["answered"] = len(scored)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="conformal,gmm", help="conformal, gmm or both (comma-separated)")
    ap.add_argument("--alphas", default="0.05,0.1,0.2")
    ap.add_argument("--questions", type=int, default=1000, help="qrels questions per seed (half held out)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--depth", type=int, default=100, help="rank depth searched for the gold paragraph")
    ap.add_argument("--types", default="simple", help="simple,broader,double")
    ap.add_argument("--limit", type=int, default=20, help="GMM questions per type")
    ap.add_argument("--nrd", type=int, default=20, help="chunks retrieved before the GMM filter (paper: 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=96, help="answer length cap (SQuAD answers are short)")
    ap.add_argument("--no-llm", action="store_true", help="GMM part without answers (NRD, ANFD, AR, gold kept only)")
    ap.add_argument("--plot", help="folder for a Figure-2 style PNG of the first question per type")
    ap.add_argument("--config", help="TOML config (index, llm and outliers sections are used)")
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-bench-filters"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.part.split(",") if p.strip()}
    if not parts or parts - {"conformal", "gmm"}:
        ap.error(f"--part takes conformal and/or gmm, got {args.part!r}")
    if "gmm" in parts and args.no_llm and set(args.types.split(",")) - {"simple"}:
        ap.error("broader and double questions are written by the LLM: drop --no-llm or use --types simple")
    config = Config.load(args.config)
    started = time.time()
    index_dir = Path(args.index_root) / "squad2"
    built = IndexBuilder(index_dir, progress=False, chunk_tokens=config.index.chunk_tokens).build([DATA / "corpus.jsonl"])
    report: dict = {"command": " ".join([sys.executable, *sys.argv]),
                    "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
                    "dataset": str(DATA), "index": {"chunks": built.chunks_total, "embedding": config.index.embedding_model}}
    llm, close = None, (lambda: None)
    with HybridIndex.open(index_dir) as index:
        if "conformal" in parts:
            report["conformal"] = conformal_part(index, args)
        if "gmm" in parts:
            if not args.no_llm:
                from ragsieve.agent.llm.factory import describe_endpoint, open_llm

                report["llm"] = describe_endpoint(config.llm)
                llm, close = open_llm(config.llm)
            try:
                report["gmm"] = gmm_part(index, args, config, llm, PromptRenderer())
            finally:
                close()
    report["elapsed_s"] = round(time.time() - started, 1)
    suffix = f"-{args.label}" if args.label else ""
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"filters{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
