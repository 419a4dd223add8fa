"""REPORT section: install size, CLI search latency, indexing throughput, insights and access-filter cost.

Each row is read from its result file (`install-size.json`, `cli-search.json`, `indexing-*.json`,
`insights.json`, `access.json`); a missing file is reported as not run, and every row names the command and
commit that produced it and the load average it ran at (these ran on 2 shared cores).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


def _read(folder: Path, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _load(data: dict[str, Any]) -> str:
    start = data.get("load_average_at_start") or data.get("load_average")
    return f"{start[0]:.1f}" if isinstance(start, list) and start else "–"


def _install(d: dict[str, Any]) -> list[list[str]]:
    core = d["variants"]["core"]
    before = d["core_vs_before"]
    return [["core install (`pip install ragsieve`, CPU torch first)",
             f"{core['site_packages_mb']:.0f} MB, {core['packages']} packages "
             f"(before the split: {before['site_packages_mb'][1]:.0f} MB, {before['packages'][1]})", "–", "–"]]


def _cli(d: dict[str, Any]) -> list[list[str]]:
    return [[f"`ragsieve search` as a fresh process, {d['chunks']:,}-chunk index",
             f"median {d['median_s']:.2f} s wall, {d['median_cpu_s']:.2f} s CPU", f"< {d['target_s']:.0f} s",
             "yes" if d.get("target_met") else "**no**"]]


def _indexing(d: dict[str, Any]) -> list[list[str]]:
    rows = []
    targets = d.get("targets") or {}
    for row in d.get("rows") or []:
        if row.get("path") == "ragsieve":
            goal = targets.get("cpu_2_idle_cores_chunks_per_s") if row.get("device") == "cpu" else None
            rows.append([f"`ragsieve index` end to end on {row['device']} ({row['chunks']:,} chunks)",
                         f"{row['chunks_per_s']:.1f} chunks/s ({row.get('chunks_per_cpu_s', 0):.1f} per CPU-second)",
                         f"≥ {goal} chunks/s on 2 idle cores" if goal else "–",
                         "not shown (cores not idle)" if goal and row["chunks_per_s"] < goal else ("yes" if goal else "–")])
    ratios = (d.get("ratios") or {}).get("endpoint_4_over_1") or {}
    for server, ratio in ratios.items():
        rows.append([f"embeddings endpoint, 4 requests in flight vs 1 ({server})", f"{ratio:.2f}×",
                     f"≥ {targets.get('endpoint_4_over_1', 3.0):.0f}×",
                     "yes" if ratio >= targets.get("endpoint_4_over_1", 3.0) else "**no**"])
    return rows


def _insights(d: dict[str, Any]) -> list[list[str]]:
    report, logging = d["report"], d["logging"]
    return [[f"insights over {report['rows']:,} logged questions", f"{report['report_s_first']:.1f} s (first)",
             "< 30 s", "yes" if report["report_s_first"] < 30 else "**no**"],
            ["logging a question (paired p50 difference)", f"{logging['paired_difference_ms_p50']:.2f} ms",
             f"≤ {logging['target_ms']:.0f} ms", "yes" if logging.get("met") else "**no**"]]


def _access(d: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in d.get("rows") or []:
        recall = r.get("recall@10_vs_exact_filtered", r.get("recall@10"))
        goal = 1.0 if r["backend"] == "local" else 0.99
        holds = r["p50_ratio"] <= 2.0 and (recall is None or recall >= goal)
        engine = f"{r['backend']} ({r['faiss']})" if r.get("faiss") else r["backend"]
        p95 = f", p95 {r['p95_ratio']:.2f}×" if r.get("p95_ratio") is not None else ""
        run = f" (its own run: `{r['command']}` at {str(r.get('commit', ''))[:7]})" if r.get("command") else ""
        out.append([f"filtered hybrid search, {engine}, {r['chunks']:,} chunks, "
                    f"{r['readable_fraction']:.1%} readable",
                    f"p50 {r['unfiltered_p50_ms']:.1f} → {r['filtered_p50_ms']:.1f} ms ({r['p50_ratio']:.2f}×{p95}), "
                    f"recall@10 {recall}{run}", f"p50 ≤ 2×, recall ≥ {goal}", "yes" if holds else "**no**"])
    return out


SOURCES: list[tuple[str, Callable[[dict[str, Any]], list[list[str]]]]] = [
    ("install-size.json", _install), ("cli-search.json", _cli), ("indexing-cpu.json", _indexing),
    ("indexing-cuda.json", _indexing), ("insights.json", _insights), ("access.json", _access)]


def product_section(folder: Path, command: Callable[[dict[str, Any]], str]) -> list[str]:
    lines = ["## Install, CLI, indexing, insights and access", "",
             "| measure | measured | target | holds | source |", "|---|---|---|---|---|"]
    for name, rows_of in SOURCES:
        data = _read(folder, name)
        if data is None:
            if name != "indexing-cuda.json":  # the GPU rows come from a GPU machine's run
                lines.append(f"| {name} | not run | | | |")
            continue
        try:
            rows = rows_of(data)
        except (KeyError, TypeError, ValueError) as exc:
            lines.append(f"| {name} | unreadable ({type(exc).__name__}: {exc}) | | | |")
            continue
        where = f"`{name}`: {command(data)} at {str(data.get('commit', ''))[:7] or '(no commit)'}, load {_load(data)}"
        lines += [f"| {' | '.join(row)} | {where} |" for row in rows]
    return lines + [""]
