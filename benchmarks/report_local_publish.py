"""REPORT.md section: the local one-document publish (scale-local-publish.json) and the approximate
nearest-neighbour pass of large indexes (sparse-ann.json)."""
from __future__ import annotations

import json
from pathlib import Path

from report_sections import _f, _table


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if values else "–"


def local_publish_section(folder: Path, command) -> list[str]:
    lines = ["## Local index: one-document publish and the sparse subset at scale", ""]
    data = _read(folder / "scale-local-publish.json")
    if data is None:
        lines += ["not run (no readable benchmarks/results/scale-local-publish.json).", ""]
    else:
        rows = []
        for size in data.get("sizes", []):
            runs = size.get("runs", [])
            one = [r["publish_s"] for r in runs if r.get("given") == "one file"]
            whole = [r["publish_s"] for r in runs if r.get("given") == "whole corpus"]
            loads = [r["load_average"][0] for r in runs if r.get("load_average")]
            rows.append([size.get("chunks"), f"{_span(one)} ({len(one)})", size.get("publish_s_median_one_file"),
                         f"{_span(whole)} ({len(whole)})" if whole else "not run",
                         max((r.get("segment_bytes", 0) for r in runs), default=None),
                         size.get("first_build_nearest_neighbours", "–"),
                         size.get("change_nearest_neighbours", "exact against all rows"), _span(loads)])
        embed = data.get("own_embedding") or {}
        lines += [f"Command: {command(data)}; commit {str(data.get('commit'))[:10]}. Hash vectors (the encoder is not "
                  "what is measured); samples on a shared 2-core machine. The edited document's own embedding by "
                  f"{embed.get('encoder', '?')} MiniLM: {_f(min(embed.get('embed_s') or [None]), 4)} s warm "
                  f"(model load {_f(embed.get('load_s'), 1)} s, apart).", ""]
        lines += _table(["chunks", "one file: publish s (samples)", "median", "whole corpus again: s (samples)",
                         "segment bytes (max)", "first build's NN pass", "a change's NN search",
                         "load average (1 min)"], rows)
    ann = _read(folder / "sparse-ann.json")
    if ann is None:
        return lines + ["Approximate nearest-neighbour pass: not run (no benchmarks/results/sparse-ann.json).", ""]
    rows = [[kind, r.get("rows"), r.get("approximate_s"), r.get("exact_s"), r.get("rows_exact"), r.get("shortfall_mean"),
             r.get("cutoff_exact"), r.get("cutoff_approximate"), r.get("sparse_agreement")]
            for kind, r in (ann.get("sets") or {}).items()]
    lines += [f"IVF vs exact nearest-neighbour pass ({command(ann)}; load average "
              f"{_f((ann.get('load_average_at_start') or [None])[0], 2)} at start):", ""]
    return lines + _table(["vectors", "rows", "IVF s", "exact s", "rows exact", "mean shortfall", "cut-off exact",
                           "cut-off IVF", "share of the exact sparse subset kept"], rows)
