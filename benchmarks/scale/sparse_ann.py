"""Agreement of the approximate (IVF) nearest-neighbour pass with the exact one, and the sparse subsets they give.

    nice -n 10 .venv/bin/python -m benchmarks.scale.sparse_ann --n 100000

Above `sparse.APPROXIMATE_ABOVE` rows an index computes each chunk's nearest-neighbour similarity with the IVF
search of `ragsieve.tools.index.sparse.ann` instead of the exact O(N^2) self-search. This runs both on the same
vectors and reports: the share of rows whose similarity equals the exact one, the mean and largest shortfall,
the percentile cut-offs, and the share of the exact sparse subset (10th percentile) that the approximate subset
keeps (`sparse_agreement`, = its precision too, both subsets having the same size up to ties). Vector sets:
`hash` (the unit hash vectors of the scale benchmarks: no structure, the worst case for a partition) and
`clustered` (a seeded mixture of N/50 Gaussian clusters on the sphere with noise, a stand-in for real
embeddings, which are clustered by topic). Times are samples on a shared machine (load averages recorded).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.scale.publish import HashEmbedder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def vectors(kind: str, n: int) -> np.ndarray:
    if kind == "hash":
        return np.concatenate([HashEmbedder().embed([f"d{i} chunk text" for i in range(s, min(n, s + 50000))])
                               for s in range(0, n, 50000)]).astype(np.float32)
    rng = np.random.default_rng(n)
    centres = rng.normal(size=(max(1, n // 50), 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.06, size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def compare(v: np.ndarray, percentile: float = 10.0) -> dict:
    from ragsieve.tools.index.sparse.ann import default_nlist, ivf_nearest_neighbours
    from ragsieve.tools.index.sparse.subset import nearest_neighbours, sparse_subset

    t0 = time.perf_counter()
    approx, _ = ivf_nearest_neighbours(v)
    approx_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact, _ = nearest_neighbours(v, exact=True)
    exact_s = time.perf_counter() - t0
    short = exact - approx
    a, e = sparse_subset(approx, percentile), sparse_subset(exact, percentile)
    both = len(set(a.rows) & set(e.rows))
    return {"rows": len(v), "nlist": default_nlist(len(v)), "nprobe": 8, "refine": "lowest 20% again in 32 cells",
            "approximate_s": round(approx_s, 1), "exact_s": round(exact_s, 1),
            "never_above_exact": bool((approx <= exact + 1e-5).all()),
            "rows_exact": round(float(np.mean(short <= 1e-5)), 4),
            "shortfall_mean": round(float(short.mean()), 5), "shortfall_max": round(float(short.max()), 4),
            "cutoff_exact": round(e.cutoff, 5), "cutoff_approximate": round(a.cutoff, 5),
            "sparse_rows_exact": len(e.rows), "sparse_rows_approximate": len(a.rows),
            "sparse_agreement": round(both / max(1, len(e.rows)), 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--kinds", default="clustered,hash")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sparse-ann.json")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    out = {"command": "python -m " + " ".join(["benchmarks.scale.sparse_ann", *(argv or sys.argv[1:])]), "commit": commit,
           "load_average_at_start": list(os.getloadavg()), "percentile": 10.0, "sets": {}}
    for kind in args.kinds.split(","):
        out["sets"][kind] = compare(vectors(kind, args.n))
        out["load_average_at_end"] = list(os.getloadavg())
        print(kind, json.dumps(out["sets"][kind]), flush=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
