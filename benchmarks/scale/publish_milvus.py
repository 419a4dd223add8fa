"""Issue 28: the Milvus side of a one-document incremental publish at 10k / 100k / 1M chunks on milvus-lite.

    nice -n 10 .venv/bin/python -m benchmarks.scale.publish_milvus --sizes 10000,100000,1000000

Why a separate part: measuring the whole `ragsieve index` + `publish` path at 1M chunks needs a 1M-chunk local
index built and rebuilt per change, which this 2-core machine shares with others for hours; the local build is
the local backend's cost (measured in `scale_publish.py` at 10k/100k). Here the collection is filled directly
with N synthetic one-chunk documents (schema of `milvus.schema.create_collection`, FLAT dense index, Milvus
BM25 over generated text, random unit vectors, every row born in generation 1) and cached under `--cache`
(building 1M rows takes long; reruns reuse it). Then one document is changed per publish: exactly the calls
`milvus.publish` makes in incremental mode, timed — `recover` (delete the rows retired by the previous
publish, by primary key), `apply_delta` (read the changed row's live entity, mark it `died = G`, insert its
new entity `born = G`, flush), and the pointer switch (one atomic file rewrite). The document's embedding is
not included (synthetic vector); it is one encoder call of one chunk.

Three modes per size: `warm` (a new process on the milvus-lite file whose pointer predates the born record:
collection loaded, the first publish looks the retired entity up by query and then reads the born record from
the collection once, `milvus.born.born_from_collection`; the later ones rebuild it from that record), `cold` (a new process on the file, nothing loaded or queried: what `ragsieve index`
does), `server` (`milvus-lite server` on the file started once, then each change from a NEW process over gRPC:
the shape of a Milvus standalone/cluster). milvus-lite's engine reads the whole collection into memory the
first time a process touches it (`engine_open_s` / `first_call_s`, O(corpus)); a server pays that once.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.scale.milvus_rows import CACHE, COLLECTION, STATE, build_collection, edit_rows, live_entities, one_change

REPO = Path(__file__).resolve().parents[2]
VERIFY_MAX = 200_000  # sizes above are not loaded afterwards to check the edits (minutes, ~6 GB at 1M)


def publish_changes(n: int, cache: Path, changes: int = 3, cold: bool = False) -> dict:
    """`changes` one-document publishes on the cached N-row milvus-lite file, in this (new) process.

    warm (`cold=False`): the collection is loaded (timed apart) and each retired row's live entity is looked up
    by a filtered query, as a publish without a `born` record does. cold: the collection is never loaded, the
    retired entity known beforehand (as `milvus.born` rebuilds it from the previous local generation): what
    `ragsieve index` pays per publish on a milvus-lite file. Either way the first call of the process opens the
    collection in milvus-lite's engine (timed as `engine_open_s`): milvus-lite 3.x reads every segment into
    memory when a process first touches a collection (`Collection.__init__` -> `_refresh_segment_cache`),
    whatever the call. The edited rows' live entities are kept in the state file (the benchmark's born record)."""
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus.client import stop_lite_server
    from ragsieve.tools.index.milvus.delta import ALL_FIELDS
    from ragsieve.tools.index.milvus.rows import visible_at

    state = json.loads(STATE(n).read_text())
    t0 = time.perf_counter()
    client = MilvusClient(str(STATE(n).parent / "milvus.db"))
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    client.has_collection(COLLECTION)
    engine_open_s = time.perf_counter() - t0
    load_s = None
    live = live_entities(state)
    if not cold:
        t0 = time.perf_counter()
        client.load_collection(COLLECTION)
        load_s = time.perf_counter() - t0
        base = int(state["visible"])
        live = {r: e for r, e in live.items() if r not in edit_rows(n)}  # looked up, as without a born record
        for e in client.query(COLLECTION, filter=f"{visible_at(base)} and row in {edit_rows(n)}",
                              output_fields=ALL_FIELDS):
            live[int(e["row"])] = {k: (list(map(float, e[k])) if k == "dense" else e[k]) for k in ALL_FIELDS}
    elif any(r not in live for r in edit_rows(n)):
        raise SystemExit("run the warm pass first (it records the edited rows' live entities)")
    rng = np.random.default_rng(state["visible"])
    # warm: the first publish looks the row up and reads the born record once; the later ones use the record
    runs = [one_change(client, state, live, n, k, rng, cold or k > 0, migrate=not cold and k == 0)
            for k in range(changes)]
    out = {"chunks": n, "mode": "cold (no load, no query)" if cold else
           "warm (pointer from before the born record: loaded, first publish queries and reads the record)",
           "collection_build_s": state.get("build_s"), "process_open_s": round(open_s, 2),
           "engine_open_s": round(engine_open_s, 2), "load_collection_s": None if load_s is None else round(load_s, 2),
           "runs": runs, "publish_s_median": float(np.median([r["publish_s"] for r in runs])),
           "max_rss_gb": round(_rss_gb(), 2)}
    out.update(_verify(client, n, runs, live, int(state["visible"]), load=cold))
    client.close()
    stop_lite_server(str(STATE(n).parent / "milvus.db"))
    return out


def _verify(client, n: int, runs: list[dict], live: dict, gen: int, load: bool) -> dict:
    """Each edit visible to a reader (not timed as publish); above VERIFY_MAX not checked (loading 1M rows into
    milvus-lite costs minutes and ~6 GB here)."""
    from ragsieve.tools.index.milvus.rows import visible_at

    texts = [r.pop("text") for r in runs]
    if n > VERIFY_MAX:  # None, not False: nothing was found wrong, nothing was checked
        return {"verified": None, "not_verified": f"{n} rows > VERIFY_MAX {VERIFY_MAX}"}
    t0 = time.perf_counter()
    if load:
        client.load_collection(COLLECTION)
    verify_load_s = time.perf_counter() - t0
    for r, _text in zip(runs, texts):
        seen = client.query(COLLECTION, filter=f"{visible_at(gen)} and row == {r['row']}", output_fields=["text"])
        r["reader_sees_latest_text"] = len(seen) == 1 and seen[0]["text"] == live[r["row"]]["text"]
    total = client.query(COLLECTION, filter=visible_at(gen), output_fields=["count(*)"])
    return {"verified": True, "load_collection_s_after": round(verify_load_s, 2),
            "visible_rows_after": int(total[0]["count(*)"]) if total else None}


def _rss_gb() -> float:
    """This process's peak resident memory (GB): `VmHWM`, which starts afresh at exec. Not `ru_maxrss`: Linux
    carries the parent's peak into a child across fork + exec, so every pass reported the 1M build's 4.6 GB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    return kb / 1e6


def server_change(n: int, port: int, k: int) -> dict:
    """One one-document publish from this fresh process to a running Milvus server (milvus-lite's gRPC server,
    which keeps the collection open as a Milvus standalone does)."""
    from pymilvus import MilvusClient

    t0 = time.perf_counter()
    client = MilvusClient(uri=f"http://127.0.0.1:{port}")
    connect_s = time.perf_counter() - t0
    state = json.loads(STATE(n).read_text())
    run = one_change(client, state, live_entities(state), n, k, np.random.default_rng(state["visible"]), cold=True)
    client.close()
    return run | {"connect_s": round(connect_s, 3)}


def server_pass(n: int, cache: Path, changes: int) -> dict:
    """A `milvus-lite server` on the cached file, opened once; then each change from a new process."""
    import signal
    import socket

    from pymilvus import MilvusClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["nice", "-n", "10", str(Path(sys.executable).parent / "milvus-lite"), "server",
                               "--data-dir", str(STATE(n).parent / "milvus.db"), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        t0 = time.perf_counter()
        client = None
        while client is None and time.perf_counter() - t0 < 120:
            try:
                client = MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=5)
            except Exception:
                time.sleep(0.5)
        if client is None:
            raise SystemExit(f"milvus-lite server for {n} did not start")
        client.has_collection(COLLECTION)  # the server opens the collection once
        server_open_s = time.perf_counter() - t0
        runs = []
        for k in range(changes):
            t1 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "benchmarks.scale.publish_milvus", "--one", f"{n}:server:{port}:{k}", "--cache", str(cache)],
                                 capture_output=True, text=True, timeout=600, cwd=REPO)
            found = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if not found:
                raise SystemExit(f"{n} server change failed:\n{out.stderr[-3000:]}")
            runs.append(json.loads(found[-1][7:]) | {"process_wall_s": round(time.perf_counter() - t1, 2)})
        state = json.loads(STATE(n).read_text())
        result = {"chunks": n, "mode": "server (milvus-lite gRPC server kept open; each change a new process)",
                  "server_open_s": round(server_open_s, 2), "runs": runs,
                  "publish_s_median": float(np.median([r["publish_s"] for r in runs]))}
        result.update(_verify(client, n, runs, live_entities(state), int(state["visible"]), load=True))
        client.close()
        return result
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def main() -> None:
    from benchmarks.scale.publish import commit

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-scale-cache")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--modes", default="warm,cold,server")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: "SIZE:warm|cold" or "SIZE:server:PORT:K"
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale_publish_milvus.json")
    args = ap.parse_args()
    CACHE[0] = args.cache
    if args.one:
        size, mode, *rest = args.one.split(":")
        if mode == "server":
            print("RESULT " + json.dumps(server_change(int(size), int(rest[0]), int(rest[1]))))
        else:
            print("RESULT " + json.dumps(publish_changes(int(size), args.cache, args.changes, cold=mode == "cold")))
        return
    sizes = [int(x) for x in args.sizes.split(",") if x]
    result = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix().split("ragsieve/")[-1]] + sys.argv[1:]),
              "commit": commit(), "cpus": os.cpu_count(), "load_average_at_start": os.getloadavg(),
              "engine": "milvus-lite 3.x (one data dir per size), FLAT dense index, INVERTED on row/born/died; "
                        "file modes open it in-process, server mode through `milvus-lite server` on loopback",
              "vectors": "synthetic random unit vectors; the document's embedding is not included", "sizes": {}}
    for n in sizes:
        state = build_collection(n, args.cache)
        print(f"collection {n}: ready ({state.get('build_s')} s to build)", flush=True)
    if args.build_only:
        return
    modes = [m for m in args.modes.split(",") if m]
    for n in sizes:
        row = {}
        for mode in modes:  # file modes each in a new process: a CLI publish on milvus-lite opens the file itself
            if mode == "server":
                row[mode] = server_pass(n, args.cache, args.changes) | {"load_average": os.getloadavg()}
            else:
                out = subprocess.run([sys.executable, "-m", "benchmarks.scale.publish_milvus", "--one", f"{n}:{mode}", "--changes",
                                      str(args.changes), "--cache", str(args.cache)],
                                     capture_output=True, text=True, timeout=7200, cwd=REPO)
                found = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
                if not found:
                    raise SystemExit(f"{n} {mode} failed:\n{out.stderr[-3000:]}")
                row[mode] = json.loads(found[-1][7:]) | {"load_average": os.getloadavg()}
            print(f"publish {n} {mode}: {json.dumps(row[mode])}", flush=True)
        result["sizes"][str(n)] = row
    summary = {}
    for mode in modes:
        runs = {n: result["sizes"][n][mode]["runs"] for n in result["sizes"]}
        # a fresh process's first publish: on the file its engine opens the collection (and warm loads it) first
        first = {n: round(r[0]["publish_s"] + (result["sizes"][n][mode].get("engine_open_s") or 0)
                          + (result["sizes"][n][mode].get("load_collection_s") or 0), 3) for n, r in runs.items()}
        later = {n: float(np.median([x["publish_s"] for x in r[1:]] or [r[0]["publish_s"]])) for n, r in runs.items()}
        summary[mode] = {"first_publish_s": first, "later_publish_s_median": later,
                         "first_largest_over_smallest": round(first[max(first, key=int)] / first[min(first, key=int)], 2)}
    result["summary"] = summary
    result["load_average_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
