"""REPORT.md sections for the pipeline stage ablation (pipeline*.json) and the service load test
(service*.json); `report.py` renders them after its own sections."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from report_plan import PREDATES


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_f(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _load(folder: Path, load, pattern: str, lines: list[str]) -> list:
    """The result files matching `pattern`; none: "not run" is said in `lines`."""
    files = load(folder, pattern)
    if not files:
        lines += [f"not run (no benchmarks/results/{pattern}).", ""]
    return files


def _readable(files, lines: list[str]):
    """(path, data) of each loaded result file; an unreadable one is named in `lines` and skipped."""
    for path, data, error in files:
        if data is None:
            lines += [f"`{path.name}`: {error if error.startswith(PREDATES) else f'unreadable ({error})'}", ""]
            continue
        yield path, data


def pipeline_section(folder: Path, load, command, machine) -> list[str]:
    lines = ["## The card's pipeline, stage by stage (pipeline*.json)", "",
             "Each plan adds one stage to the one above it (fast -> +judge -> +fallback -> +conformal -> +gmm -> "
             "+rse = full); judges are the scripted oracle and noisy oracles (flipN: N % of verdicts flipped), "
             "since no capable model runs here. gold recall: share of gold documents in the final context "
             "(HotpotQA: both gold paragraphs); tokens: context tokens given to the answer step.", ""]
    files = _load(folder, load, "pipeline*.json", lines)
    for path, data in _readable(files, lines):
        lines += [f"### `{path.name}`", "", f"Command: {command(data)}; {machine(data)}; "
                  f"load average {_f((data.get('load_average') or [None])[0], 2)}.", ""]
        rows = []
        for r in data.get("rows") or []:
            rule = ", ".join(f"{k} {v}" for k, v in (r.get("rule") or {}).items() if k != "-") or "-"
            rows.append([r.get("dataset"), r.get("judge"), r.get("plan"), r.get("n"), r.get("gold_recall"),
                         r.get("both_gold_recall"), r.get("context_tokens"), r.get("llm_calls"), r.get("em"),
                         r.get("abstain_unanswerable"), rule])
        lines += _table(["set", "judge", "plan", "n", "gold recall", "both gold", "context tokens", "LLM calls",
                         "EM", "abstains (unanswerable)", "context rule applied (questions)"], rows)
        for name, info in (data.get("sets") or {}).items():
            measured = (info or {}).get("judge_reliability") or {}
            if measured:
                lines += [f"Judges measured on {name}'s calibration questions (per fold; `loop.combine = auto` "
                          "decides from these):", ""]
                lines += _table(["judge", "fold", "n", "judge recall", "false positives", "fast recall", "pool recall"],
                                [[j, f, m.get("n"), m.get("judge_recall"), m.get("false_positive_rate"),
                                  m.get("fast_recall"), m.get("pool_recall")]
                                 for j, folds in measured.items() for f, m in folds.items()])
            cov = (info or {}).get("coverage")
            if cov:
                kinds = (info or {}).get("calibrated_kinds") or {}
                chosen = ", ".join(f"fold {f}: {k}" for f, k in kinds.items()) or "not recorded"
                lines += [f"Conformal set on {name}, final context, held-out (target 1 - alpha; any gold / every "
                          "gold / per (question, gold) pair; size vs raw: the CONFLARE raw-similarity set's size; "
                          f"calibrated kind chosen by `ragsieve calibrate` on held-out calibration data: {chosen}):", ""]
                raw = {k.split("|")[0]: v.get("mean_context") for k, v in cov.items() if k.endswith("|raw")}
                rows = []
                for key, v in cov.items():
                    size, base = v.get("mean_context"), raw.get(key.split("|")[0])
                    rows.append([key.replace("|", ", "), v.get("n"), v.get("target"), v.get("coverage"),
                                 v.get("all_gold"), v.get("per_gold"), size,
                                 _f(size / base) if base and size is not None else None])
                lines += _table(["alpha, threshold", "n", "target", "any gold", "every gold", "per gold",
                                 "mean set size", "size vs raw"], rows)
            if info and info.get("sparse_share") is not None:
                lines += [f"Sparse subset of {name}: {info.get('sparse_rows')} of {info.get('chunks')} chunks "
                          f"({_f(info.get('sparse_share'))}).", ""]
    return lines


def service_section(folder: Path, load, command, machine) -> list[str]:
    lines = ["## Service load test (service*.json)", "",
             "`ragsieve serve` on loopback, `fast` plan, fixed requests per level; latency in seconds. "
             "Overhead: server p50 at 1 client minus `Orchestrator.ask` p50 on the same questions in the same "
             "run (target <= 10 ms); model: throughput at 4 clients / 1 client (target >= 1.5).", ""]
    files = _load(folder, load, "service*.json", lines)
    for path, data in _readable(files, lines):
        if data.get("live"):
            lines += _live_rows(path, data, command)
            continue
        lines += [f"Command: {command(data)}; {machine(data)}; load average "
                  f"{_f((data.get('load_average_at_start') or [None])[0], 2)} at start, "
                  f"{_f((data.get('load_average_at_end') or [None])[0], 2)} at end.", ""]
        rows = []
        for b in data.get("backends") or []:
            for r in b.get("levels") or []:
                rows.append([b.get("backend"), r.get("clients"), "yes" if r.get("stream") else "no", r.get("ok"),
                             r.get("errors"), r.get("rejected_429"), r.get("throughput_rps"), r.get("p50_s"),
                             r.get("p95_s"), r.get("p99_s"), r.get("ttft_p50_s")])
        lines += _table(["backend", "clients", "stream", "ok", "errors", "429", "req/s", "p50", "p95", "p99",
                         "TTFT p50"], rows)
        summary = []
        for b in data.get("backends") or []:
            ask = b.get("orchestrator_ask") or {}
            summary.append([b.get("backend"), ask.get("p50_s"), b.get("overhead_p50_ms"),
                            b.get("throughput_4_over_1")])
        lines += _table(["backend", "Orchestrator.ask p50 (s)", "server overhead p50 (ms)",
                         "throughput 4 / 1 clients"], summary)
    return lines


def _live_rows(path: Path, data: dict, command) -> list[str]:
    """A live-index run (`service.py --live-only`): upload-to-searchable and search latency per index size."""
    live = data["live"]
    lines = [f"Live index ({path.name}): one small file uploaded through the documents API until a search finds it "
             f"(hash vectors: the file's own MiniLM embedding, {_f(live.get('minilm_embed_s'))} s, is apart). "
             f"Command: {command(data)}; load average {_f((data.get('load_average_at_start') or [None])[0], 2)}.", ""]
    rows = []
    for size in live.get("sizes") or []:
        idle, busy = size.get("query_idle") or {}, size.get("query_during_uploads") or {}
        took = size.get("upload_to_searchable_s") or []
        rows.append([size.get("chunks"), len(took), _f(min(took)) if took else None, _f(max(took)) if took else None,
                     idle.get("p50_s"), idle.get("p95_s"), busy.get("p50_s"), busy.get("p95_s")])
    return lines + _table(["chunks", "uploads", "upload-to-searchable min (s)", "max (s)", "search p50 idle",
                           "p95 idle", "p50 during uploads", "p95 during uploads"], rows)


def scale_section(folder: Path, load, command, machine) -> list[str]:
    lines = ["## Scale: backends, encoders, synthetic corpora (scale*.json)", ""]
    files = _load(folder, load, "scale*.json", lines)
    for _path, data in _readable(files, lines):
        lines += [f"Command: {command(data)}; {machine(data)}; load average "
                  f"{_f((data.get('load_average_at_start') or [None])[0], 2)} at start.", ""]
        lines += parity_lines(data.get("parity"))
        enc = data.get("encoders")
        if enc:
            rows = [[name, (enc.get(name) or {}).get("docs_per_s"), (enc.get(name) or {}).get("speedup_vs_torch"),
                     (enc.get(name) or {}).get("cosine_mean"), (enc.get(name) or {}).get("cosine_min"),
                     (enc.get(name) or {}).get("load_average")] for name in ("torch", "onnx", "onnx-int8")]
            lines += [f"Encoders on {enc.get('docs')} SciFact abstracts, one run (target: >= 2x torch with cosine "
                      f">= 0.99):", ""]
            lines += _table(["encoder", "docs/s", "x torch", "cosine mean", "cosine min", "load average"], rows)
        quality = data.get("encoder_quality")
        if quality:
            rows = [[name, (quality.get(name) or {}).get("hybrid_ndcg@10"), (quality.get(name) or {}).get("dense_ndcg@10"),
                     (quality.get(name) or {}).get("hybrid_ndcg_difference"), (quality.get(name) or {}).get("build_s"),
                     (quality.get(name) or {}).get("load_average")] for name in ("torch", "onnx", "onnx-int8")]
            lines += [f"SciFact indexed with each encoder ({quality.get('queries')} test queries; target: hybrid "
                      f"nDCG@10 within 0.005 of torch):", ""]
            lines += _table(["encoder", "hybrid nDCG@10", "dense nDCG@10", "difference", "build s", "load average"],
                            rows)
        build = data.get("build_overlap")
        if build:
            lines += [f"Index build of {build.get('docs')} abstracts, BM25 built while encoding vs after it "
                      f"(alternated): sequential {build.get('sequential')} s, overlapped {build.get('overlap')} s, "
                      f"speed-up {build.get('speedup')}x.", ""]
        rows = []
        for n, row in (data.get("scale") or {}).items():
            for backend, r in row.items():
                if not isinstance(r, dict):
                    continue
                if r.get("skipped"):
                    rows.append([n, backend, f"not run: {r['skipped']}"] + [None] * 7 + [row.get("vectors"), None])
                    continue
                rows.append([n, backend, r.get("build_s"), r.get("disk_mb"), r.get("rss_growth_mb"),
                             r.get("hybrid_p50_ms"), r.get("hybrid_p95_ms"), r.get("hybrid_server_p50_ms", "-"),
                             r.get("ann_recall@10"), r.get("ann"), row.get("vectors", "random unit vectors"),
                             r.get("queries", row.get("queries"))])
        if rows:
            lines += _table(["chunks", "backend", "build s", "disk MB", "RSS growth MB", "hybrid p50 ms",
                             "hybrid p95 ms", "Milvus hybrid_search p50 ms", "ANN recall@10", "ANN index",
                             "vectors", "queries timed"], rows)
        lines += extrapolation(data)
        from report_scale_out import scale_out_lines

        lines += scale_out_lines(data)  # issue 28: Milvus publishes, encoders on the shared sets, Ray
    return lines


def parity_lines(parity: dict | None) -> list[str]:
    if not parity:
        return []
    lines: list[str] = []
    runs = [(k, parity[k]) for k in ("as_built", "bm25_as_milvus_lite") if k in parity] or [("as_built", parity)]
    for label, run in runs:
        rows = [[b, m, (run[b].get(m) or {}).get("ndcg@10"), (run[b].get(m) or {}).get("recall@100"),
                 (run[b].get(m) or {}).get("query_p50_ms")] for b in ("local", "milvus") if b in run
                for m in run[b]]
        what = {"as_built": "the index as built (local BM25 k1 0.9, b 0.4; milvus-lite ignores them: 1.5 / 0.75)",
                "bm25_as_milvus_lite": "the local BM25 re-fit at milvus-lite's k1 1.5, b 0.75 (same vectors)"}[label]
        lines += [f"SciFact parity, {what}; {run.get('queries')} test queries (target: within 0.005):", ""]
        lines += _table(["backend", "retrieval", "nDCG@10", "Recall@100", "query p50 ms"], rows)
        diffs = run.get("differences_vs_local") or {}
        if diffs:
            lines += ["Milvus minus local, absolute: " + "; ".join(
                f"{m} nDCG {_f(d.get('ndcg@10'), 4)}, R@100 {_f(d.get('recall@100'), 4)}" for m, d in diffs.items()),
                ""]
    return lines


def gmm_section(folder: Path, load, command, machine) -> list[str]:
    """The GMM paper's Table 1 grid (filters*.json with a `gmm.types.<kind>.<reader>.rows` table)."""
    lines = ["## GMM outlier filter: the paper's Table 1 grid (filters*.json)", ""]
    files = _load(folder, load, "filters*.json", lines)
    shown = False
    for path, data in _readable(files, lines):
        gmm = data.get("gmm") or {}
        for kind, readers in (gmm.get("types") or {}).items():
            for reader, result in (readers or {}).items():
                if not isinstance(result, dict) or "rows" not in result:
                    continue
                shown = True
                definition = ("eq. 15 (mean of per-question ratios)" if "n_ratio" in (result["rows"] or [{}])[0]
                              else "a ratio of sums over questions, NOT eq. 15 (written before that fix; no commit "
                                   "recorded)")
                lines += [f"`{path.name}`, {kind} questions, {reader} reader; Emb%/TFIDF% as {definition}. "
                          f"Command: {command(data)}", ""]
                if "Emb%_vs_all" in (result["rows"] or [{}])[0]:  # issue 46: the paper's baseline is the headline
                    lines += [f"Baseline: {result.get('baseline', 'top-k of the same size')}.", ""]
                    lines += _table(["alpha", "method", "freq", "n", "NRD", "ANFD", "AR", "Emb% (vs top-k)",
                                     "TFIDF% (vs top-k)", "Emb% vs all", "TFIDF% vs all", "gold kept",
                                     "gold in top-k"],
                                    [[r["alpha"], r["method"], r["min_outlier_freq"], r["n"], r["NRD"], r["ANFD"],
                                      r["AR"], r["Emb%"], r["TFIDF%"], r["Emb%_vs_all"], r["TFIDF%_vs_all"],
                                      r.get("gold_kept"), r.get("gold_in_topk")] for r in result["rows"]])
                    continue
                lines += _table(["alpha", "method", "freq", "n", "NRD", "ANFD", "AR", "Emb% vs all", "TFIDF% vs all",
                                 "Emb% vs top-k", "TFIDF% vs top-k", "gold kept"],
                                [[r["alpha"], r["method"], r["min_outlier_freq"], r["n"], r["NRD"], r["ANFD"], r["AR"],
                                  r["Emb%"], r["TFIDF%"], r["Emb%_vs_topk"], r["TFIDF%_vs_topk"], r.get("gold_kept")]
                                 for r in result["rows"]])
        if gmm.get("paper") and shown:
            best = gmm["paper"]["best_row"]
            lines += [f"Paper (answers by TinyLlama-1.1B; GPT-4o wrote the questions and references): best row "
                      f"{best['method']}, alpha {best['alpha']}: Emb% +{best['Emb%']}, "
                      f"TFIDF% +{best['TFIDF%']} (Bulgakov 2024 Table 1 as quoted in issue 11, SQuAD 2.0).", ""]
    return lines if shown else []


def extrapolation(data: dict) -> list[str]:
    """100M chunks on a Milvus cluster, from the vector arithmetic and the measured per-chunk disk."""
    dim, n = 384, 100_000_000
    raw = dim * 4 * n / 1e9
    hnsw = 32 * 2 * 4 * n / 1e9  # level-0 links: 2M neighbours x 4-byte ids per vector
    pq = 48 * n / 1e9  # IVF_PQ with m = 48 sub-quantisers of 8 bits
    measured = None
    for size, row in (data.get("scale") or {}).items():
        milvus = row.get("milvus-lite") or {}
        if milvus.get("disk_mb"):
            measured = (int(size), milvus["disk_mb"])
    lines = ["Extrapolation to 100M chunks on a Milvus cluster (384-d MiniLM vectors):", "",
             "| quantity | arithmetic | result |", "|---|---|---|",
             f"| float32 vectors | 384 dims x 4 B x 100M | {raw:.1f} GB |",
             f"| HNSW graph (M=32) | 2 x 32 links x 4 B x 100M | {hnsw:.1f} GB |",
             f"| HNSW in memory | vectors + graph | {raw + hnsw:.1f} GB per replica |",
             f"| per million vectors | ({raw:.1f} + {hnsw:.1f}) GB / 100 | {(raw + hnsw) / 100:.2f} GB |",
             f"| IVF_PQ (m=48) instead | 48 B x 100M (+ raw vectors on disk) | {pq:.1f} GB in memory |"]
    if measured:
        per_chunk = measured[1] * 1e6 / measured[0]
        lines.append(f"| everything on disk (measured) | {measured[1]:.0f} MB / {measured[0]:,} chunks = "
                     f"{per_chunk:.0f} B per chunk x 100M | {per_chunk * n / 1e9:.0f} GB |")
    shards = int(-(-(raw + hnsw) // 48))
    lines += [f"| query nodes for HNSW | {raw + hnsw:.0f} GB / 48 GB usable per 64 GB node | {shards} nodes "
              f"(+1 replica set for availability) |", ""]
    return lines
