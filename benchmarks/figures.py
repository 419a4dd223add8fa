"""The README's headline figures: one reader per result file, each giving the `Figure`s it holds (what is
measured, ragsieve's figure, what it stands beside, the files), in the table's order (`READERS`). A figure
measured on a sample, or with a stand-in for a real model, says so in its row. `benchmarks/report.py` puts the
rows in README.md and REPORT.md; a reader that cannot read its file gives a row saying so, never a number.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Published SciFact (BEIR test split) nDCG@10 baselines for BM25 (also in ../shared/data/README.md).
PUBLISHED_BM25 = (("BEIR paper", 0.665), ("Pyserini", 0.679))

Data = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    """One row: what is measured, ragsieve's figure, what it stands beside (a published baseline, a peer
    library, a target or the simpler plan), and the result files it comes from (`table` sets them)."""

    measure: str
    ours: str
    beside: str
    files: tuple[str, ...] = ()


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def _retrieval(d: Data) -> list[Figure]:
    m = d["methods"]
    published = ", ".join(f"{score} ({where})" for where, score in PUBLISHED_BM25)
    return [
        Figure(
            f"Retrieval, SciFact (BEIR test, {d['queries']} queries), nDCG@10",
            f"**{m['hybrid_weighted']['ndcg@10']:.3f}** hybrid (default); BM25 alone "
            f"{m['bm25s']['ndcg@10']:.3f}, dense alone {m['dense']['ndcg@10']:.3f}",
            f"BM25 published: {published}; rank-bm25 on the same chunks {m['rank_bm25']['ndcg@10']:.3f}",
        )
    ]


def _retrieval_speed(d: Data) -> list[Figure]:
    m = d["methods"]
    return [
        Figure(
            "Hybrid search in process, SciFact, p50",
            f"{m['hybrid_weighted']['latency_ms_p50']:.1f} ms + {d['query_embedding_ms']['p50']:.1f} ms query embedding",
            f"peers on the same chunks: bm25s {m['bm25s']['latency_ms_p50']:.1f} ms, rank-bm25 "
            f"{m['rank_bm25']['latency_ms_p50']:.1f} ms (BM25 only)",
        )
    ]


def _row(rows: list[Data], judge: str, plan: str) -> Data:
    return next(r for r in rows if r.get("judge") == judge and r.get("plan") == plan)


def _hotpot_oracle(d: Data) -> list[Figure]:
    fast, full = _row(d["rows"], "oracle", "fast"), _row(d["rows"], "oracle", "full")
    return [
        Figure(
            f"HotpotQA ({full['n']} questions), both gold paragraphs in the context, `full` plan; oracle judge (a proxy)",
            f"**{full['both_gold_recall']:.3f}** at {full['context_tokens'] / fast['context_tokens']:.2f}× "
            "`fast`'s context tokens",
            f"`fast` (hybrid top 5): {fast['both_gold_recall']:.3f}",
        )
    ]


def _hotpot_embedded(d: Data) -> list[Figure]:
    fast, full = _row(d["rows"], "embedded-0.5b", "fast"), _row(d["rows"], "embedded-0.5b", "full")
    return [
        Figure(
            f"The same, embedded Qwen 0.5B as judge and reader (a sample, {full['n']} questions)",
            f"{full['both_gold_recall']:.2f}, {full['seconds']:.0f} s a question",
            f"`fast`: {fast['both_gold_recall']:.2f}, {fast['seconds']:.0f} s",
        )
    ]


COVERAGE_ALPHA = 0.1
COVERAGE_SETS = ("squad2", "hotpotqa", "scifact")  # hotpotqa counts each gold paragraph; the others any gold


def _coverage(*files: Data) -> list[Figure]:
    shown, bounds = [], []
    for name, data in zip(COVERAGE_SETS, files):
        cov = data["sets"][name]["coverage"][f"alpha={COVERAGE_ALPHA}|calibrated"]
        pairs = cov["n"] * (2 if name == "hotpotqa" else 1)
        bounds.append(f"{1 - COVERAGE_ALPHA - 2 * ((1 - COVERAGE_ALPHA) * COVERAGE_ALPHA / pairs) ** 0.5:.3f}")
        shown.append(f"{name} {cov['per_gold' if name == 'hotpotqa' else 'coverage']:.3f}")
    return [
        Figure(
            f"Gold passage kept by the calibrated context, α = {COVERAGE_ALPHA}, no judge",
            ", ".join(shown),
            f"guarantee 1 − α − 2 s.e.: {' / '.join(bounds)} (CONFLARE)",
        )
    ]


def _unanswerable(d: Data, n: int, answerable: int | None) -> str:
    """How many of the run's `n` questions were unanswerable: its `--squad-evaluate A,U`, else `n` less the
    answerable ones the stage check counted, else unknown."""
    match = re.search(r"--squad-evaluate\s+(\d+),(\d+)", str(d.get("command", "")))
    if match:
        return match.group(2)
    return str(n - answerable) if answerable is not None else "?"


def _abstention(d: Data) -> list[Figure]:
    """Each judge's row, read by the scripted reader the file names (`gullible`: fooled by a plausible wrong
    answer in its context, so a plan that stuffs its context with near-miss text loses)."""
    rows = d["sets"]["squad2"]["rows"]
    judges = [k.split("|")[0] for k in rows if k.endswith("|full") and f"{k.split('|')[0]}|fast" in rows]
    n = rows[f"{judges[0]}|full"]["n"]
    unanswerable = _unanswerable(d, n, rows[f"{judges[0]}|full"].get("stage_n"))
    full = "; ".join(
        f"{j} {_pct(rows[f'{j}|full']['abstain_unanswerable'])} / {_pct(rows[f'{j}|full']['abstain_answerable'])}" for j in judges
    )
    fast = "; ".join(
        f"{j} {_pct(rows[f'{j}|fast']['abstain_unanswerable'])} / {_pct(rows[f'{j}|fast']['abstain_answerable'])}" for j in judges
    )
    return [
        Figure(
            f"Abstention, SQuAD 2.0 ({n} questions, {unanswerable} unanswerable), unanswerable / answerable abstained; "
            f"scripted judges, a {d.get('reader', 'oracle')} reader (a proxy)",
            f"`full`: {full}",
            f"`fast`: {fast}; target: `full` ≥ `fast` on unanswerable",
        )
    ]


def _code(d: Data) -> list[Figure]:
    code = d["code"]
    on = code["symbols_on"]
    return [
        Figure(
            f"Code search, {on['n']} docstring queries over 20 stdlib modules",
            f"R@5 **{on['recall@5']:.3f}**; the quick start's question at rank {code['readme_question']['rank']}",
            "target R@5 ≥ 0.70",
        )
    ]


def _web(d: Data) -> list[Figure]:
    web = d["web"]
    api = web["api_questions"]
    return [
        Figure(
            f"Website docs ({web['pages_crawled']} crawled pages), {api['n']} API questions",
            f"definition at rank 1: {api['recall@1']:.3f}; cited anchor right: {api['anchor_precision_all']:.3f}",
            "target ≥ 0.90",
        )
    ]


def _gmm(d: Data) -> list[Figure]:
    types = d["gmm"]["types"]
    paper = d["gmm"]["paper"]["best_row"]
    ours = []
    for kind in ("simple", "broader", "double"):
        row = next(
            r
            for r in types[kind]["extractive"]["rows"]
            if r["alpha"] == 0.5 and r["method"] == "interaction" and r["min_outlier_freq"] == 4
        )
        ours.append(f"{kind} {row['Emb%']:+.2f}")
    return [
        Figure(
            "GMM outliers (off by default), SQuAD 2.0 answer gain Emb% over top-k; "
            "a stand-in extractive reader, 60 questions a type",
            ", ".join(ours),
            f"Bulgakov 2024 Table 1 best row: {paper['Emb%']:+.1f} (TinyLlama reader)",
        )
    ]


def _cli(d: Data) -> list[Figure]:
    return [
        Figure(
            f"`ragsieve search` as a fresh process, {d['chunks']:,}-chunk index, {d['cpus']} busy cores",
            f"median {d['median_s']:.2f} s wall, {d['median_cpu_s']:.2f} s CPU",
            f"target < {d['target_s']:.0f} s",
        )
    ]


def _indexing(d: Data) -> list[Figure]:
    row = next(r for r in d["rows"] if r.get("path") == "ragsieve")
    return [
        Figure(
            f"`ragsieve index` end to end, {row['chunks']:,} SciFact chunks, CPU",
            f"{row['chunks_per_s']:.1f} chunks/s ({row['chunks_per_cpu_s']:.1f} per CPU-second)",
            f"target ≥ {d['targets']['cpu_2_idle_cores_chunks_per_s']} chunks/s on 2 idle cores",
        )
    ]


def _encoder(d: Data) -> list[Figure]:
    """The default encoder (each text embedded alone, so vectors do not depend on the batch) against torch
    fp32 on the same chunks of each set: indexing speed per CPU-second and the nDCG@10 it costs."""
    sets = d["sets"]
    ratios = ", ".join(f"{name} {s['onnx-int8']['index_cpu_ratio_vs_torch']:.1f}×" for name, s in sets.items())
    deltas = ", ".join(f"{name} {s['onnx-int8']['hybrid_ndcg_difference']:+.4f}" for name, s in sets.items())
    return [
        Figure(
            "Default encoder (`onnx-int8` MiniLM, each text alone) vs `torch` fp32, chunks per CPU-second",
            ratios,
            f"hybrid nDCG@10 change: {deltas}",
        )
    ]


def _publish(d: Data) -> list[Figure]:
    largest = max(d["sizes"], key=lambda s: s["chunks"])
    times = sorted(r["publish_s"] for r in largest["runs"] if r.get("given") == "one file")
    return [
        Figure(
            f"One-document update of a {largest['chunks']:,}-chunk local index (hash vectors)",
            f"median {times[len(times) // 2]:.2f} s",
            "target ≤ 2 s plus the document's embedding",
        )
    ]


def _service(d: Data) -> list[Figure]:
    fake = next(b for b in d["backends"] if b["backend"].startswith("fake"))
    model = next(b for b in d["backends"] if not b["backend"].startswith("fake"))
    one = next(level for level in fake["levels"] if level["clients"] == 1 and not level["stream"])
    real = next(level for level in model["levels"] if level["clients"] == 1 and not level["stream"])
    return [
        Figure(
            "`ragsieve serve`, one client, `fast` plan: the service's own cost (an instant fake LLM)",
            f"p50 {one['p50_s'] * 1000:.0f} ms, {one['throughput_rps']:.0f} questions/s",
            f"with the embedded 0.5B model: p50 {real['p50_s']:.2f} s",
        )
    ]


def _install(d: Data) -> list[Figure]:
    core, before = d["variants"]["core"], d["core_vs_before"]
    return [
        Figure(
            "Install size, `pip install ragsieve` (CPU torch first)",
            f"{core['site_packages_mb']:.0f} MB ({core['site_packages_without_torch_mb']:.0f} MB besides "
            f"torch), {core['packages']} packages",
            f"before the extras split: {before['site_packages_mb'][1]:.0f} MB, {before['packages'][1]} packages",
        )
    ]


# (area, id, result files, reader), in the table's order; the id is REPORT.md's anchor (`#fig-<id>`). A reader
# gets one result per file and returns its figures.
READERS: list[tuple[str, str, tuple[str, ...], Callable[..., list[Figure]]]] = [
    ("quality", "retrieval-scifact", ("retrieval_scifact.json",), _retrieval),
    ("quality", "hotpotqa-full-oracle", ("pipeline-ablation-hotpotqa-oracle.json",), _hotpot_oracle),
    ("quality", "hotpotqa-full-embedded", ("pipeline-embedded-hotpotqa.json",), _hotpot_embedded),
    (
        "quality",
        "coverage-calibrated",
        ("pipeline-coverage-default-squad2.json", "pipeline-coverage-default.json", "pipeline-coverage-default-scifact.json"),
        _coverage,
    ),
    ("quality", "abstention-squad2", ("pipeline-abstention.json",), _abstention),
    ("quality", "code-search", ("sources.json",), _code),
    ("quality", "website-docs", ("sources-web.json",), _web),
    ("quality", "gmm-table1", ("filters-gmm-std.json",), _gmm),
    ("speed", "search-in-process", ("retrieval_scifact.json",), _retrieval_speed),
    ("speed", "cli-search", ("cli-search.json",), _cli),
    ("speed", "index-cpu", ("indexing-cpu.json",), _indexing),
    ("speed", "default-encoder", ("scale_encoder_sets.json",), _encoder),
    ("speed", "local-publish-1m", ("scale-local-publish.json",), _publish),
    ("speed", "serve-fast", ("service.json",), _service),
    ("size", "install-size", ("install-size.json",), _install),
]
UNREADABLE = (KeyError, TypeError, ValueError, StopIteration, ZeroDivisionError, IndexError)


def table(read: Callable[[str], Data | None], why: Callable[[str], str]) -> list[tuple[str, str, Figure]]:
    """(area, id, figure) of README's table, each figure naming its reader's files. A file `read` does not give
    (None) or that does not hold what its reader expects gives a row saying so (`why(file)`), never a number."""
    out = []
    for area, fid, files, reader in READERS:
        data = [read(f) for f in files]
        missing = [f for f, d in zip(files, data) if d is None]
        try:
            found = [Figure(f"`{missing[0]}`", why(missing[0]), "")] if missing else reader(*data)
        except UNREADABLE as exc:
            found = [Figure(f"`{files[0]}`", f"unreadable ({type(exc).__name__}: {exc})", "")]
        out += [(area, fid, Figure(f.measure, f.ours, f.beside, files)) for f in found]
    return out
