"""The first table of REPORT.md: each open promise's target, what the current result files measure, whether
it holds, and the file. Only result files that record the commit they ran at count; a target no such file
measures says so instead of passing."""
from __future__ import annotations

from pathlib import Path

from report_headline import EVENT, SETS, _f, _two_se, stage_steps
from report_plan import PREDATES, predating
from report_stages import in_run_steps

YES, NO, UNMEASURED = "yes", "**no**", "not measured"
JUDGES = ("oracle", "oracle-flip10", "oracle-flip25", "embedded-0.5b")  # the judge levels issue 23 names


def _current(load, folder: Path, pattern: str) -> list[tuple[Path, dict]]:
    return [(p, d) for p, d, _ in load(folder, pattern) if d is not None and d.get("commit")]


def _predating(load, folder: Path, pattern: str) -> str:
    """'; predates …: `a.json`' for the files matching `pattern` that ran an earlier plan ('' when none)."""
    names = [f"`{p.name}`" for p, _ in predating(load(folder, pattern))]
    return f"; {PREDATES}: {', '.join(names)}" if names else ""


def _names(found) -> str:
    return ", ".join(f"`{p.name}`" for p, _ in found) or "–"


def abstention_rows(folder: Path, load) -> list[list[str]]:
    """Per judge: `full` abstains on unanswerable ≥ `fast` and on answerable ≤ `fast` + 2 points (issue 46).
    Scripted judges count only with a reader that can be fooled (`reader: gullible`): the oracle reader abstains
    whenever no gold string is in its prompt, so `fast` and `full` decide alike by construction. A judge's `fast`
    row comes from its own file; else the oracle's of the same reader (the scripted judges share the reader)."""
    found = _current(load, folder, "pipeline-abstention*.json") + _current(load, folder, "pipeline-embedded-squad2*.json")
    rows: dict = {}
    constructed = []
    for path, data in found:
        scripted = path.name.startswith("pipeline-abstention")
        if scripted and data.get("reader") != "gullible":
            constructed.append(path)
            continue
        for key, r in ((data.get("sets") or {}).get("squad2", {}).get("rows", {})).items():
            judge, plan = key.split("|")
            rows[judge, plan] = (r, path)
    target = "full ≥ fast on unanswerable, ≤ fast + 0.02 on answerable"
    out = []
    for (judge, plan), (full, path) in sorted(rows.items()):
        if plan != "full":
            continue
        fast, fast_path = rows.get((judge, "fast")) or rows.get(("oracle", "fast")) or (None, None)
        if fast is None or full.get("abstain_unanswerable") is None:
            out.append([f"abstention, judge {judge}", target, "no `fast` reference", UNMEASURED, f"`{path.name}`"])
            continue
        fu, fa = full.get("abstain_unanswerable"), full.get("abstain_answerable")
        su, sa = fast.get("abstain_unanswerable"), fast.get("abstain_answerable")
        embedded = path.name.startswith("pipeline-embedded")  # a sample, not a target (issue 56): no answerable margin
        holds = fu >= su and (embedded or fa is None or sa is None or fa <= sa + 0.02)
        files = f"`{path.name}`" + ("" if fast_path == path else f" (fast: `{fast_path.name}`)")
        reader = "" if path.name.startswith("pipeline-embedded") else ", gullible reader"
        out.append([f"abstention, judge {judge}{reader} (n {full.get('n')})",
                    "full ≥ fast on unanswerable (answerable: a sample of n, not a target)" if embedded else target,
                    f"unanswerable {_f(fu)} vs {_f(su)}; answerable {_f(fa)} vs {_f(sa)}", YES if holds else NO, files])
    out += [["abstention, scripted judges", target, "the oracle reader decides by construction (re-run with "
             "`--reader gullible`)", UNMEASURED, f"`{p.name}`"] for p in constructed]
    return out or [["abstention on SQuAD 2.0", "full vs fast", "–", UNMEASURED, "`pipeline-abstention*.json`"]]


def coverage_rows(folder: Path, load) -> list[list[str]]:
    found = _current(load, folder, "pipeline-coverage-default*.json")
    checks = []
    for _, data in found:
        for name, info in (data.get("sets") or {}).items():
            for key, v in ((info or {}).get("coverage") or {}).items():
                if not key.endswith("|calibrated") or v.get(EVENT.get(name, "coverage")) is None:
                    continue
                alpha, cov, n = float(key.split("|")[0].split("=")[1]), v.get(EVENT.get(name, "coverage")), v.get("n")
                pairs = n * 2 if name == "hotpotqa" and n else n
                checks.append((name, alpha, cov - (1 - alpha - (_two_se(1 - alpha, pairs) or 0))))
    if not checks:
        return [["coverage, default `full`", "≥ 1 − α − 2 s.e.", "–", UNMEASURED, "`pipeline-coverage-default*.json`"]]
    sets = sorted({c[0] for c in checks})
    worst = min(checks, key=lambda c: c[2])
    held = sum(c[2] >= 0 for c in checks)
    missing = [s for s in ("squad2", "hotpotqa", "scifact") if s not in sets]
    return [["coverage, default `full` (α 0.05/0.1/0.2)", "≥ 1 − α − 2 s.e. on SQuAD, HotpotQA, SciFact",
             f"{held} of {len(checks)} hold; tightest {worst[0]} α {worst[1]}: margin {worst[2]:+.3f}"
             + (f"; not measured: {', '.join(missing)}" if missing else ""),
             YES if held == len(checks) and not missing else NO, _names(found)]]


def ablation_rows(folder: Path, load) -> list[list[str]]:
    found = _current(load, folder, "pipeline-ablation*.json")
    if not found:
        return [["stages of default `full`", "no stage loses > 1 s.e. of gold recall", "–", UNMEASURED,
                 "`pipeline-ablation*.json`"]]
    steps = [(s[0], s[0].get("plan"), s[2], s[4]) for s in stage_steps(found) if s[2] is not None]
    in_run = _current(load, folder, "pipeline-embedded*.json")  # the embedded judge: stages from its `full` trace
    steps += [(r, stage, d, miss) for r, stage, _g, _se, d, miss in in_run_steps(in_run) if d is not None]
    misses = [s for s in steps if s[3]]
    judges = sorted({s[0].get("judge") for s in steps})
    measured_sets = {(s[0].get("judge"), s[0].get("dataset")) for s in steps}
    unmeasured = [f"{j} on {', '.join(m)}" if len(m) < len(SETS) else j for j in JUDGES
                  if (m := sorted(d for d in SETS if (j, d) not in measured_sets))]
    worst = min(steps, key=lambda s: s[2]) if steps else None
    measured = (f"{len(misses)} of {len(steps)} stage steps lose > 1 s.e. (judges {', '.join(judges)}); "
                f"largest loss {worst[2]:+.3f} ({worst[0].get('dataset')} {worst[0].get('judge')} {worst[1]})"
                if worst else "–") + (f"; not measured: {'; '.join(unmeasured)}" if unmeasured else "") + \
        _predating(load, folder, "pipeline-embedded*.json")
    files = f"{len(found)} files `pipeline-ablation-*.json`" + (f", {_names(in_run)}" if in_run else "")
    out = [["stages of default `full`", "no stage loses > 1 s.e. of gold recall, every judge", measured,
            YES if not misses and not unmeasured else NO, files]]
    for path, data in found:
        rows = {(r.get("dataset"), r.get("judge"), r.get("plan")): r for r in data.get("rows") or []}
        fast, full = rows.get(("hotpotqa", "oracle", "fast")), rows.get(("hotpotqa", "oracle", "full"))
        if fast and full and fast.get("context_tokens") and full.get("both_gold_recall") is not None:
            ratio = full["context_tokens"] / fast["context_tokens"]
            out.append(["oracle HotpotQA `full` both-gold", "≥ 0.95 at ≤ 0.6× `fast`'s tokens",
                        f"{_f(full['both_gold_recall'])} at {ratio:.2f}×",
                        YES if full["both_gold_recall"] >= 0.95 and ratio <= 0.6 else NO, f"`{path.name}`"])
    return out


def embedded_rows(folder: Path, load) -> list[list[str]]:
    found = _current(load, folder, "pipeline-embedded*.json")
    n_by_set: dict[str, int] = {}
    for _, data in found:
        for r in data.get("rows") or []:
            n = r.get("n") or 0
            n_by_set[r.get("dataset")] = min(n_by_set.get(r.get("dataset"), n), n)
    measured = ("; ".join(f"{s} n {n}" for s, n in sorted(n_by_set.items())) or "–") + \
        _predating(load, folder, "pipeline-embedded*.json")
    enough = all(n_by_set.get(s, 0) >= 50 for s in SETS)
    return [["embedded 0.5B rows", "n ≥ 50 per set (SQuAD 2.0, HotpotQA, SciFact)", measured,
             YES if enough else NO, _names(found)]]


def gmm_rows(folder: Path, load) -> list[list[str]]:
    found = _current(load, folder, "filters-gmm*.json")
    n_by_type: dict[str, int] = {}
    for _, data in found:
        for kind, readers in ((data.get("gmm") or {}).get("types") or {}).items():
            for result in (readers or {}).values():
                ns = [r.get("n") or 0 for r in result.get("rows") or []]
                if ns:
                    n_by_type[kind] = max(n_by_type.get(kind, 0), min(ns))
    measured = "; ".join(f"{k} n {n}" for k, n in sorted(n_by_type.items())) or "–"
    return [["GMM Table 1 (eq. 15)", "n ≥ 60 per question type", measured,
             YES if n_by_type and min(n_by_type.values()) >= 60 else NO, _names(found)]]


SOURCES_TARGETS = {"identifier_rank1_ge_0.90": "identifier queries: definition at rank 1 ≥ 0.90",
                   "code_recall@5_ge_0.70": "code R@5 ≥ 0.70 (docstring queries)",
                   "api_anchor_precision_ge_0.90": "cited anchor is the definition's ≥ 0.90",
                   "readme_question_in_top5": "the README's `_read_chunked` question finds it"}


def _sources_figure(base: str, data: dict) -> str | None:
    """The measured figure behind a sources target (the file's `targets` holds only whether it holds)."""
    code = (data.get("code") or {}).get("symbols_on") or {}
    api = ((data.get("web") or {}).get("api_questions")) or {}
    readme = (data.get("code") or {}).get("readme_question") or {}
    figures = {
        "identifier_rank1_ge_0.90": "; ".join(f"{name} {_f(part.get('identifier_rank1_rate'))} of "
                                              f"{part.get('identifier_queries')}"
                                              for name, part in (("code", code), ("web", api)) if part),
        "code_recall@5_ge_0.70": code and f"{_f(code.get('recall@5'))} ({round(code['recall@5'] * code['n'])} of {code['n']})",
        "api_anchor_precision_ge_0.90": api and f"{_f(api.get('anchor_precision_all'))} of {api.get('questions')} API questions",
        "readme_question_in_top5": readme and f"rank {readme.get('rank')}",
    }
    return figures.get(base) or None


def sources_rows(folder: Path, load) -> list[list[str]]:
    out = []
    for path, data in _current(load, folder, "sources*.json"):
        for key, value in (data.get("targets") or {}).items():
            base = key.split(" (")[0]
            values = value if isinstance(value, list) else [value]
            if all(v is None for v in values) or base not in SOURCES_TARGETS:
                continue
            holds = all(v is not False for v in values)
            shown = _sources_figure(base, data) or ", ".join("–" if v is None else str(v).lower() for v in values)
            out.append([f"sources: {SOURCES_TARGETS[base]}", key, shown, YES if holds else NO, f"`{path.name}`"])
        summary = (data.get("answers") or {}).get("summary") or {}
        for corpus, s in summary.items():
            follows = s.get("gold_in_top5_not_in_sources") == 0
            out.append([f"sources: embedded-model answers, {corpus}",
                        "≥ 60 questions; gold in the reply's sources whenever in the top 5",
                        f"{s.get('answered')} answered of {s.get('planned')}; gold in top 5 {s.get('gold_in_top5')}, "
                        f"in sources {s.get('gold_in_sources')}", YES if follows and (s.get("answered") or 0) >= 60
                        else NO, f"`{path.name}`"])
    return out


MILVUS_MODES = {"server": "Milvus server", "cold": "milvus-lite file opened by the new process",
                "warm": "milvus-lite file, pointer from before the born record (read once)"}


def scale_rows(folder: Path, load) -> list[list[str]]:
    """Issue 28: a one-document publish at 1M chunks ≤ 2 s (Milvus per mode, local), the default encoder's
    chunks per CPU-second ≥ 2× torch's, and its nDCG@10 within the tolerance on every set."""
    out = []
    for path, data in _current(load, folder, "scale_publish_milvus.json"):
        for mode, s in (data.get("summary") or {}).items():
            first = (s.get("first_publish_s") or {}).get("1000000")
            if first is not None:
                later = s.get("later_publish_s_median") or {}
                out.append([f"scale: one-document publish at 1M, {MILVUS_MODES.get(mode, mode)}", "≤ 2 s from a new process",
                            f"first {first:.2f} s (10k: {_f((s.get('first_publish_s') or {}).get('10000'), 2)} s); "
                            f"later ones median {_f(later.get('1000000'), 2)} s",
                            YES if first <= 2 else NO, f"`{path.name}`"])
    for path, data in _current(load, folder, "scale-local-publish.json"):
        for size in data.get("sizes") or []:
            if size.get("chunks", 0) >= 1_000_000 and size.get("publish_s_median_one_file") is not None:
                t = size["publish_s_median_one_file"]
                out.append(["scale: one-document publish at 1M, local", "≤ 2 s plus the document's embedding",
                            f"median {t:.1f} s", YES if t <= 2 else NO, f"`{path.name}`"])
    for path, data in _current(load, folder, "scale_cpu_ray.json"):
        ratio = (data.get("index_chunks_per_cpu_s") or {}).get("ratio_default_over_torch")
        if ratio is not None:
            out.append(["scale: `ragsieve index` chunks per CPU-second, default encoder vs torch", "≥ 2×",
                        f"{ratio:.2f}×", YES if ratio >= 2 else NO, f"`{path.name}`"])
    for path, data in _current(load, folder, "scale_encoder_sets.json"):
        verdict = ((data.get("verdict") or {}).get("onnx-int8") or {})
        if verdict:
            out.append(["scale: onnx-int8 nDCG@10 vs torch (per set: `set_runs`)", "within 0.005 on SciFact, SQuAD 2.0, HotpotQA",
                        f"{verdict.get('sets')} set(s) measured; worst hybrid {_f(verdict.get('worst_hybrid_difference'), 4)}",
                        YES if verdict.get("within_tolerance_on_all") and verdict.get("sets") == 3 else NO,
                        f"`{path.name}`"])
    return out


def targets_section(folder: Path, load) -> list[str]:
    rows = []
    for part in (abstention_rows, coverage_rows, ablation_rows, embedded_rows, gmm_rows, sources_rows, scale_rows):
        rows += part(folder, load)
    lines = ["### Targets at a glance", "",
             "| promise | target | measured | holds | result file |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines + ["", "Commands, commits and load averages: in the blocks below and in each file.", ""]
