"""Filter benchmark on SQuAD 2.0: conformal coverage (no LLM) and the GMM paper's Table-1 measures.

    .venv/bin/python -m benchmarks.pipeline.filters --part conformal                   # seconds after the index exists
    .venv/bin/python -m benchmarks.pipeline.filters --part gmm --limit 60 --types simple,broader,double \
        --readers extractive,llm --llm-limit 20       # any OpenAI endpoint: OPENAI_BASE_URL / --config

Conformal: the SQuAD qrels (gold paragraph = positive) are the calibration set, so no
LLM is needed. `--questions` questions are sampled per seed and split half calibration /
half held-out by `agent.calibration.Calibrator`; for alpha in {0.05, 0.1, 0.2} and each
nonconformity score: held-out coverage against 1-alpha (binomial tolerance 2 s.e.) and the
mean number of chunks kept, plus the fixed top-k reaching the same coverage.

GMM: the paper's Table 1 (Bulgakov 2024) over alpha x method x min_outlier_freq, with its
measures exactly (ratio of sums, eqs. 14-15), simple / broader / double questions and two
readers; see benchmarks/pipeline/gmm_table.py for the definitions and how questions are written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_io import commit

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from ragsieve.agent.calibration import Calibrator  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.agent.llm.templates import PromptRenderer  # noqa: E402
from ragsieve.agent.steps.outliers import build_filter  # noqa: E402
from ragsieve.tools.filters.conformal import binomial_tolerance  # noqa: E402
from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.index.building.encoder_choice import recorded_encoder  # noqa: E402
from ragsieve.tools.index.local.index import HybridIndex  # noqa: E402

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
                questions=args.questions, queries_path=DATA / "queries.jsonl", qrels_path=DATA / "qrels" / "test.tsv"
            )
            runs.append(cal)
        m = runs[0].n_heldout
        tol = binomial_tolerance(1 - alpha, m)
        kinds = {}
        for k in runs[0].report["kinds"]:
            name = k["kind"]
            per = [next(x for x in r.report["kinds"] if x["kind"] == name) for r in runs]
            covs = [p["coverage"] for p in per]
            kinds[name] = {
                "coverage_mean": round(float(np.mean(covs)), 4),
                "coverage_per_seed": covs,
                "mean_kept": round(float(np.mean([p["mean_set_size"] for p in per])), 2),
                "mean_within_tolerance": abs(float(np.mean(covs)) - (1 - alpha)) <= tol,
                "seeds_within_tolerance": sum(abs(c - (1 - alpha)) <= tol for c in covs),
            }
        best = min(kinds, key=lambda n: kinds[n]["mean_kept"])
        out["alphas"][str(alpha)] = {
            "target": round(1 - alpha, 3),
            "n_calibration": runs[0].n_calibration,
            "n_heldout": m,
            "tolerance": round(tol, 4),
            "not_found_mean": float(np.mean([r.n_not_found for r in runs])),
            "chosen_per_seed": [r.score_kind for r in runs],
            "kinds": kinds,
            "fixed_top_k_at_equal_coverage": [r.report["fixed_top_k_at_equal_coverage"] for r in runs],
            "smallest_kind": best,
            "smallest_vs_raw": round(kinds[best]["mean_kept"] / kinds["raw"]["mean_kept"], 3),
        }
        print(
            f"alpha={alpha}: "
            + ", ".join(f"{n} cov {v['coverage_mean']:.3f} kept {v['mean_kept']:.1f}" for n, v in kinds.items()),
            flush=True,
        )
    return out


def gmm_part(index, args, config: Config, llm, prompts) -> dict:
    """The paper's Table 1 grid (benchmarks/pipeline/gmm_table.py) per question type and reader."""
    from benchmarks.pipeline import gmm_table

    base = config.outliers.model_dump()

    def factory(alpha, method, freq):
        return build_filter(config.outliers.model_copy(update={"alpha": alpha, "method": method, "min_outlier_freq": freq}))

    types = args.types.split(",")
    questions = {"simple": gmm_table.load_simple(DATA, args.limit, args.seed)} if "simple" in types else {}
    if {"broader", "double"} & set(types):
        model = config.llm.model or config.llm.local_model
        generated = gmm_table.generate(
            DATA,
            args.limit,
            args.seed,
            llm,
            prompts,
            Path(args.questions_file),
            str(model),
            progress=lambda m: print(m, flush=True),
        )
        questions.update({k: v for k, v in generated.items() if k in types})
        generation = {
            "model": str(model),
            "windows": generated["windows"],
            "failed": generated["failed"],
            "prompt": "prompts/broader_question.j2",
            "double": "two of the broader questions from different articles joined by ' Also, ' "
            "(question i with one about n/2 positions on: each broader question is in two)",
        }
    out: dict = {
        "nrd": args.nrd,
        "filter_defaults": base,
        "grid": "alpha x method x min_outlier_freq",
        "paper": gmm_table.PAPER,
        "questions_file": args.questions_file,
        "types": {},
        "question_counts": {k: len(v) for k, v in questions.items()},
    }
    if {"broader", "double"} & set(types):
        out["generation"] = generation
    index = CachedEmbeddings(index)  # answers and sentences recur across the grid's rows: embed each once
    for reader_kind in args.readers.split(","):
        read = gmm_table.Readers(reader_kind, index, llm, prompts, args.max_tokens)
        for kind, qs in questions.items():
            qs = qs[: args.llm_limit] if reader_kind == "llm" and args.llm_limit else qs
            result = gmm_table.table(index, qs, factory, read, args.nrd, progress=lambda m: print(m, flush=True))
            out["types"].setdefault(kind, {})[reader_kind] = result
            best = result["best_by_emb"]
            print(
                f"{kind}/{reader_kind}: best Emb% {best['Emb%']} TFIDF% {best['TFIDF%']} at alpha {best['alpha']} "
                f"{best['method']} freq {best['min_outlier_freq']} (n={best['n']})",
                flush=True,
            )
        out.setdefault("reader_calls", {})[reader_kind] = read.calls
    return out


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
    ap.add_argument("--readers", default="extractive,llm", help="extractive (no LLM) and/or llm (the configured endpoint)")
    ap.add_argument("--llm-limit", type=int, default=0, help="llm reader: the first N questions per type (0: all)")
    ap.add_argument(
        "--questions-file",
        default=str(REPO / "benchmarks" / "results" / "gmm_questions.json"),
        help="cache of the LLM-written broader and double questions (rewritten when the model differs)",
    )
    ap.add_argument("--config", help="TOML config (index, llm and outliers sections are used)")
    ap.add_argument("--index-root", default=str(Path(tempfile.gettempdir()) / "ragsieve-bench-filters"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--label", default="")
    ap.add_argument("--standardize", action="store_true", help="GMM: standardise the features (the paper's eq. 9)")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.part.split(",") if p.strip()}
    if not parts or parts - {"conformal", "gmm"}:
        ap.error(f"--part takes conformal and/or gmm, got {args.part!r}")
    config = Config.load(args.config)
    # broader/double questions come from the cache when it holds --limit of them: no LLM is started for them
    from benchmarks.pipeline import gmm_table

    writer = str(config.llm.model or config.llm.local_model)
    to_write = (
        bool(set(args.types.split(",")) - {"simple"})
        and gmm_table.cached_questions(Path(args.questions_file), writer, args.seed) < args.limit
    )
    needs_llm = "llm" in args.readers.split(",") or to_write
    if args.standardize:
        config.outliers = config.outliers.model_copy(update={"standardize": True})
    started = time.time()
    index_dir = Path(args.index_root) / "squad2"
    built = IndexBuilder(index_dir, progress=False, chunk_tokens=config.index.chunk_tokens).build([DATA / "corpus.jsonl"])
    report: dict = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "commit": commit(),
        "load_average": os.getloadavg(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "dataset": str(DATA),
        "index": {
            "chunks": built.chunks_total,
            "embedding": config.index.embedding_model,
            "encoder": recorded_encoder(index_dir),
        },
    }
    llm, close = None, (lambda: None)
    with HybridIndex.open(index_dir) as index:
        if "conformal" in parts:
            report["conformal"] = conformal_part(index, args)
        if "gmm" in parts:
            if not needs_llm:
                report["llm"] = "none started (extractive reader; questions from the cache)"
            else:
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
