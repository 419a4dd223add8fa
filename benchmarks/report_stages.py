"""Stage by stage inside one `full` run: the gold recall after each filter step of the plan's first pass, read
from its own trace (`pipeline_rows.stage_recalls`), chained after the same file's `fast` row. One run of the
default plan measures every stage, so the embedded judge's stage check costs no run per stage. Only result
files that record the commit they ran at are used."""
from __future__ import annotations

import math
from pathlib import Path

from report_headline import _f, _source


def _se(g: float | None, n: int | None) -> float | None:
    return None if g is None or not n else math.sqrt(max(g * (1 - g), 1e-12) / n)


def in_run_steps(found) -> list[tuple[dict, str, float | None, float | None, float | None, bool]]:
    """(row, stage, gold recall, its s.e., change against the stage before, whether that change loses more than
    one s.e.) for each `full`-plan row that recorded stages: `fast` (the file's row for the same set and judge),
    then each recorded stage, `final` last."""
    out = []
    for _path, data in found:
        rows = data.get("rows") or []
        fast = {(r.get("dataset"), r.get("judge")): r for r in rows if r.get("plan") == "fast"}
        for r in rows:
            stages, n = r.get("stage_gold_recall"), r.get("stage_n")
            if r.get("plan") != "full" or not stages or not n:
                continue
            before = fast.get((r.get("dataset"), r.get("judge")))
            chain = ([("fast", before.get("gold_recall"), n)] if before else []) + \
                [(s, g, n) for s, g in stages.items()]
            prev = None
            for stage, g, size in chain:
                se = _se(g, size)
                d = None if prev is None or g is None or prev[0] is None else g - prev[0]
                miss = d is not None and d < -max(prev[1] or 0.0, se or 0.0)
                out.append((r, stage, g, se, d, miss))
                prev = (g, se)
    return out


def judges_with_stages(found) -> set[str]:
    return {r.get("judge") for r, *_ in in_run_steps(found)}


def in_run_lines(folder: Path, load, command) -> list[str]:
    found = [(p, d) for p, d, _ in load(folder, "pipeline-*.json") if d is not None and d.get("commit")]
    steps = in_run_steps(found)
    if not steps:
        return ["- Stage by stage inside one `full` run: no current result file records stages (runs from before "
                "rows carried `stages` do not).", ""]
    lines = ["**Stage by stage inside one `full` run** (gold recall after each filter step of the first pass, "
             "read from the run's trace; `fast` is the same file's paired row; `final` is the answer's context, "
             "after any fallback pass; n: answerable questions that recorded stages):", "",
             "| set | judge | stage | n | gold recall | ± 1 s.e. | Δ recall |", "|---|---|---|---|---|---|---|"]
    misses = []
    for r, stage, g, se, d, miss in steps:
        if miss:
            misses.append(f"{r.get('dataset')} {r.get('judge')} {stage} ({d:+.3f})")
        lines.append(f"| {r.get('dataset')} | {r.get('judge')} | {stage} | {r.get('stage_n')} | {_f(g)} | {_f(se)} | "
                     f"{'–' if d is None else f'{d:+.3f}'} |")
    lines += ["", ("Stages that lower gold recall by more than one s.e.: " + "; ".join(misses)) if misses
              else "No stage lowers gold recall by more than one s.e. in these runs.", ""]
    for path, data in found:  # a run with the prefix plans beside `full`: the method checked question by question
        for name, info in (data.get("sets") or {}).items():
            agree = info.get("stage_agreement") if isinstance(info, dict) else None
            if agree:
                lines += [f"Check of the method (`{path.name}`, {name}): the prefix plan run on its own ends with the "
                          "same gold recall as the stage inside `full` on " + "; ".join(
                              f"{a['equal']} of {a['questions']} questions ({stage})" for stage, a in agree.items())
                          + ".", ""]
    used = {id(d) for r, *_ in steps for _p, d in found if r in (d.get("rows") or [])}
    return lines + [f"Source: {_source(p, d, command)}" for p, d in found if id(d) in used] + [""]
