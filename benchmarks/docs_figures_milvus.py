"""The one-document Milvus publish figures of docs/scaling.md, from `scale_publish_milvus.json`
(`benchmarks/scale_publish_milvus.py`): the table of publishes per corpus size and mode, and the phrases around
it (the engine's open, its memory, the load, the born-record read). Modes: `server` (a milvus-lite server kept
open, each publish from a new process), `cold` (a new process opens the file: *file* on the page) and `warm`
(a pointer from before the born record: loaded, the first publish reads the record)."""
from __future__ import annotations

from collections.abc import Callable

from docs_figures_scaling import size_label
from docs_markers import Results, figure, fixed, span
from report_figure_rows import Data

FILE = "scale_publish_milvus.json"
TARGET_S = 2.0  # the project's target for a one-document publish at 1M chunks (a goal, not a measurement)


def _sizes(results: Results) -> list[tuple[int, Data]]:
    """(chunks, {mode: part}) from the smallest corpus to the largest."""
    return sorted((int(n), modes) for n, modes in results(FILE)["sizes"].items())


def _largest(results: Results) -> tuple[str, Data]:
    n, modes = _sizes(results)[-1]
    return size_label(n), modes


def _publishes(part: Data) -> list[float]:
    return [float(run["publish_s"]) for run in part["runs"]]


def _seconds(values: list[float]) -> str:
    return ", ".join(fixed(v, 2) for v in values)


def _short(value: float) -> str:
    """Engine open or load: one decimal, two below 0.1 s ('0.05', '0.1', '0.9', '8.6')."""
    return fixed(value, 2 if value < 0.095 else 1)


def _long(value: float) -> str:
    """A first publish or the born-record read: two decimals below 1 s, one below 100 s, else whole seconds."""
    return fixed(value, 2 if value < 1 else 1 if value < 99.5 else 0)


@figure("milvus-table")
def milvus_table(results: Results) -> str:
    """Per corpus size: the server's publishes; the file's engine open then its publishes; the old pointer's
    open + load, first publish (its born-record read), then the rest. The largest size in bold where it matters."""
    lines = ["| N chunks | server: each publish from a new process | file, new process: engine open, then the "
             "publishes | file, pointer from before the born record: engine open + load, then the publishes |",
             "|---|---|---|---|"]
    sizes = _sizes(results)
    for i, (n, modes) in enumerate(sizes):
        bold = (lambda s: f"**{s}**") if n == sizes[-1][0] else (lambda s: s)
        server, cold, warm = modes["server"], modes["cold"], modes["warm"]
        first, *rest = warm["runs"]
        lines.append(
            f"| {n:,} | {bold(_seconds(_publishes(server)) + ' s')} "
            f"| {bold(fixed(cold['engine_open_s'], 2) + ' s')}, then {_seconds(_publishes(cold))} s "
            f"| {_short(warm['engine_open_s'])} + {_short(warm['load_collection_s'])} s, then "
            f"{_long(first['publish_s'])} s ({'born record read' if i == 0 else 'record'}: {_long(first['migrate_born_s'])} s), "
            f"{_seconds([r['publish_s'] for r in rest])} s |")
    return "\n".join(lines)


def _all_runs(results: Results) -> list[Data]:
    return [run for _n, modes in _sizes(results) for part in modes.values() for run in part["runs"]]


def _index_cost(cold: Data) -> float:
    """A CLI publish of one edited file that no process holds: process start, engine open, the publish."""
    return float(cold["process_open_s"] + cold["engine_open_s"] + cold["runs"][0]["publish_s"])


def _phrases(results: Results) -> dict[str, Callable[[], str]]:
    at, big = _largest(results)
    server, cold, warm = big["server"], big["cold"], big["warm"]
    first = warm["runs"][0]
    later = [run["publish_s"] for _n, modes in _sizes(results) for run in modes["cold"]["runs"]]
    return {
        # a publish from a new process to a milvus-lite server, at the largest size
        "server-range": lambda: f"{span(_publishes(server), 2)} s at {at}",
        # what a new process pays to open the file, and its memory then
        "open": lambda: f"{fixed(cold['engine_open_s'], 1)} s at {at}",
        "open-memory": lambda: f"{fixed(cold['engine_open_s'], 1)} s and {fixed(cold['max_rss_gb'], 1)} GB at {at}",
        # loading the search indexes of an opened collection
        "load": lambda: (f"another {fixed(warm['load_collection_s'], 1)} s, {fixed(warm['max_rss_gb'], 1)} GB "
                         f"peak at {at}"),
        "server-open": lambda: f"{fixed(server['server_open_s'], 1)} s at {at}",
        # every publish of the file column, whatever the size
        "publishes": lambda: f"{span(later, 2)} s",
        # `ragsieve index` of one edited file that no process holds: process start, engine open, the publish
        "index-cost": lambda: f"{fixed(_index_cost(cold), 1)} s",
        # the old pointer's first publish: the retired rows looked up, then the born record read
        "lookup": lambda: f"{fixed(first['apply_delta_s'], 1)} s at {at}",
        "born-read": lambda: f"{_long(first['migrate_born_s'])} s at {at}",
        "samples": lambda: str(len(cold["runs"])),
        # the target, against the server's slowest publish and against a CLI publish that opens the file
        "server-target": lambda: (f"{'under' if max(_publishes(server)) <= TARGET_S else 'over'} the "
                                  f"{TARGET_S:g} s target at {at}"),
        "index-target": lambda: (f"the {TARGET_S:g} s target is "
                                 f"{'met' if _index_cost(cold) <= TARGET_S else 'missed'}"),
    }


@figure("milvus")
def milvus(results: Results, phrase: str) -> str:
    """One phrase about the Milvus publish (`_phrases` names them)."""
    return _phrases(results)[phrase]()


@figure("milvus-checks")
def milvus_checks(results: Results) -> str:
    """Rows written / retired per publish, and up to which size a reader was checked to see each edit."""
    runs = _all_runs(results)
    written = {run["rows_written"] for run in runs}
    retired = {run["rows_retired"] for run in runs}
    rows = (f"Rows written / retired: {written.pop()} / {retired.pop()} in every publish"
            if len(written) == len(retired) == 1 else
            f"Rows written / retired: {min(written)}-{max(written)} / {min(retired)}-{max(retired)} per publish")
    checked = [n for n, modes in _sizes(results) if all(part.get("verified") for part in modes.values())]
    seen = all(run.get("reader_sees_latest_text", True) for run in runs)
    if not checked:
        return f"{rows}; no reader was checked"
    return (f"{rows}; readers {'saw each edit' if seen else 'missed an edit'} (checked up to "
            f"{size_label(max(checked))})")
