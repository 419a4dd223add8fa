"""Does the GMM outlier filter (Bulgakov 2024, arXiv:2407.01403) flag a planted off-topic chunk? (issue 46)

    .venv/bin/python benchmarks/gmm_planted.py --limit 60 [--index-root /tmp/idx]

For each HotpotQA question: the 19 chunks most similar to the question by dense cosine, best first, and a
20th planted chunk, drawn (seeded) from the 200 chunks least similar to it: off topic by construction. The
filter (tools/filters/gmm.py) runs on these 20 vectors at the paper's settings (interaction features,
alpha 0.5, PCA 2 and 3, K 4-6, 15th percentile; min_outlier_freq 2 as in the authors' run script and 4 as
shipped) and with one component (K = 1, flagged in both of its 2 runs), with and without eq. 9's
standardisation, `protect_top` 0. Reported per setting: on how many questions the planted chunk was
flagged, the mean on-topic chunks flagged, and the mean flagged among the best four. The control replaces the
planted chunk with the 20th most similar chunk: how often position 20 is flagged when it is on topic.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
from bench_io import header, write  # noqa: E402
from pipeline_data import DATA, build_index  # noqa: E402

from ragsieve.tools.filters.gmm import GMMOutlierFilter  # noqa: E402
from ragsieve.tools.index.backend import vectors_of  # noqa: E402
from ragsieve.tools.index.embedders.device import default_encoder  # noqa: E402
from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402
from ragsieve.tools.index.engines.open import open_index  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PAPER = {"method": "interaction", "alpha": 0.5, "pca_dims": [2, 3], "percentile": 15.0, "protect_top": 0}
SETTINGS = [(k, freq, std) for k, freq in (((4, 5, 6), 2), ((4, 5, 6), 4), ((1,), 2)) for std in (False, True)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--index-root", default=str(REPO / "benchmarks" / ".indexes"))
    ap.add_argument("--label", default="gmm-planted")
    args = ap.parse_args(argv)
    result = header()
    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2", encoder=default_encoder())
    index = open_index(build_index("hotpotqa", Path(args.index_root), embedder))
    vectors = np.asarray(vectors_of(index)[list(range(len(index)))], dtype=float)
    questions = [json.loads(x) for x in (DATA / "hotpotqa" / "qa.jsonl").read_text(encoding="utf-8").splitlines()
                 if x.strip()][: args.limit]
    rng = random.Random(args.seed)
    tallies = {s: {"planted": 0, "control": 0, "on_topic": 0, "best_four": 0} for s in SETTINGS}
    cosines = []
    for q in questions:
        qvec = np.asarray(index.embed_query(q["question"]), dtype=float).reshape(-1)
        sims = vectors @ qvec
        order = np.argsort(-sims, kind="stable")
        planted = int(order[len(order) - 1 - rng.randrange(200)])
        cosines.append(float(sims[planted]))
        pools = {"planted": vectors[list(order[:19]) + [planted]], "control": vectors[order[:20]]}
        for k, freq, std in SETTINGS:
            flt = GMMOutlierFilter(**PAPER, n_components=list(k), min_outlier_freq=freq, standardize=std)
            flags = flt.run(pools["planted"], qvec).outliers
            tally = tallies[(k, freq, std)]
            tally["planted"] += int(flags[19])
            tally["on_topic"] += sum(flags[:19])
            tally["best_four"] += sum(flags[:4])
            tally["control"] += int(flt.run(pools["control"], qvec).outliers[19])
    n = len(questions)
    result.update({
        "index": str(Path(args.index_root) / "hotpotqa"), "encoder": "default (all-MiniLM-L6-v2)", "questions": n,
        "seed": args.seed, "planted_cosine_mean": round(float(np.mean(cosines)), 4),
        "settings": PAPER, "rows": [
            {"n_components": list(k), "min_outlier_freq": freq, "standardize": std,
             "planted_flagged": t["planted"], "control_flagged": t["control"],
             "on_topic_flagged_per_question": round(t["on_topic"] / n, 3),
             "best_four_flagged_per_question": round(t["best_four"] / n, 3)}
            for (k, freq, std), t in tallies.items()]})
    for row in result["rows"]:
        print(row, flush=True)
    return write(result, REPO / "benchmarks" / "results" / f"filters-{args.label}.json")


if __name__ == "__main__":
    sys.exit(main())
