"""REPORT section for issue 46's promises, each on its own kind of data: coverage measured with judges per
calibration fold, COS-Mix's first stage over R (`full-R`) beside the whole index (`full`), and RSE on long
documents (`rse-long*.json`), with the paper's measure beside the paper's number."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(_f(c) for c in r) + " |" for r in rows] + [""])


def promises_section(folder: Path, load: Callable, command: Callable) -> list[str]:
    lines: list[str] = []
    folds = [(p, d) for p, d, _ in load(folder, "pipeline-coverage-folds-*.json") if d]
    if folds:
        lines += ["## Coverage with judges, per calibration fold (issue 46)", "",
                  "Per-gold coverage of the final `full` context on answerable questions, each fold evaluated on an "
                  "index copy calibrated on the other fold's questions (α 0.1); `target` = 1 − α − 2 s.e. at the "
                  "fold's n; `members kept`: share of questions whose every conformal-set member reached the "
                  "answer (itself or inside a segment).", ""]
        rows = []
        for path, data in folds:
            for name, s in data["sets"].items():
                for key, cell in s["rows"].items():
                    judge, plan = key.split("|")
                    for fold, f in (cell.get("folds") or {}).items():
                        rows.append([name, judge, plan, fold, f["n"], f["per_gold"], f["any_gold"], f["target"],
                                     ", ".join(f"{k} {v}" for k, v in f["rules"].items()), f["members_kept"]])
            lines += [f"`{path.name}`: {command(data)} (commit {data.get('commit', '?')[:12]}, load "
                      f"{_f(data.get('load_average', [None])[0], 1)})", ""]
        lines += _table(["set", "judge", "plan", "fold", "n", "per gold", "any gold", "target", "rule", "members kept"],
                        rows)
        lines += ["## COS-Mix's first stage over R (`full-R`) vs over the whole index (`full`)", "",
                  "`full-R` retrieves from R only (the corpus less the sparse subset S, `retrieval.exclude_sparse`), "
                  "as COS-Mix's first stage does; S is searched by the fallback.", ""]
        rows = []
        for _, data in folds:
            for name, s in data["sets"].items():
                for judge in sorted({k.split("|")[0] for k in s["rows"]}):
                    a, b = s["rows"].get(f"{judge}|full"), s["rows"].get(f"{judge}|full-R")
                    if a and b:
                        rows.append([name, judge, a["n"], s.get("sparse_share"), a["gold_recall"], b["gold_recall"],
                                     (a.get("stage_gold_recall") or {}).get("+judge"),
                                     (b.get("stage_gold_recall") or {}).get("+judge"),
                                     round(a["context_tokens"]), round(b["context_tokens"])])
        lines += _table(["set", "judge", "n", "sparse share", "gold recall full", "full-R", "after judge full",
                         "full-R", "tokens full", "full-R"], rows)
    for path, data in ((p, d) for p, d, _ in load(folder, "rse-long*.json") if d):
        paper = data.get("paper") or {}
        lines += ["## RSE on long documents (issue 46)", "",
                  f"`{path.name}`: {command(data)} (commit {data.get('commit', '?')[:12]}, load "
                  f"{_f((data.get('load_average_at_start') or [None])[0], 1)}). `full` with and without RSE where "
                  "the gold span sits inside a multi-chunk document; span-level scripted judge and reader, so "
                  "`answered` is the paper's kind of measure (answer accuracy) read as \"the context holds the span\". "
                  f"Paper: {paper.get('system')}, {paper.get('measure')} {paper.get('dsRAG')} % vs vanilla RAG "
                  f"{paper.get('vanilla_rag')} % ({paper.get('source')}; the whole system, not RSE alone).", ""]
        rows = []
        for corpus, c in data["corpora"].items():
            per = c["chunks_per_document"]
            for key, cell in c["rows"].items():
                rows.append([corpus, f"{c['documents']} / {per['median']}", key, cell["n"], cell["answered"],
                             cell["span_in_context"], round(cell["tokens"]), cell["passages"], cell["rse_applied"],
                             cell["segment_chunks"], cell["members_kept"]])
        lines += _table(["corpus", "docs / median chunks per doc", "judge | plan", "n", "answered", "span in context",
                         "tokens", "passages", "RSE applied", "chunks per segment", "members kept"], rows)
    return lines
