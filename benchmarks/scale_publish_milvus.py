"""Issue 28: the Milvus side of a one-document incremental publish at 10k / 100k / 1M chunks on milvus-lite.

    nice -n 10 .venv/bin/python benchmarks/scale_publish_milvus.py --sizes 10000,100000,1000000

Why a separate part: measuring the whole `ragsieve index` + `publish` path at 1M chunks needs a 1M-chunk local
index built and rebuilt per change, which this 2-core machine shares with others for hours; the local build is
the local backend's cost (measured in `scale_publish.py` at 10k/100k). Here the collection is filled directly
with N synthetic one-chunk documents (schema of `milvus_publish.create_collection`, FLAT dense index, Milvus
BM25 over generated text, random unit vectors, every row born in generation 1) and cached under `--cache`
(building 1M rows takes long; reruns reuse it). Then one document is changed per publish: exactly the calls
`milvus_publish` makes in incremental mode, timed — `recover` (delete the rows retired by the previous
publish, by primary key), `apply_delta` (read the changed row's live entity, mark it `died = G`, insert its
new entity `born = G`, flush), and the pointer switch (one atomic file rewrite). The document's embedding is
not included (synthetic vector); it is one encoder call of one chunk.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
COLLECTION = "chunks"
VERIFY_MAX = 200_000  # sizes above are not loaded afterwards to check the edits (memory)
DIM = 384


def _texts(rng, n: int) -> list[str]:
    vocab = [f"w{i}" for i in range(20000)]
    return [" ".join(vocab[w] for w in rng.zipf(1.3, 20) % len(vocab)) for _ in range(n)]


def _entities(rows: list[int], texts: list[str], vectors: np.ndarray, generation: int) -> list[dict]:
    from ragsieve.tools.index.milvus_publish import analysed
    from ragsieve.tools.index.milvus_rows import ALIVE, primary_key

    return [{"pk": primary_key(generation, r), "row": r, "born": generation, "died": ALIVE, "doc_id": f"d{r}",
             "chunk_index": 0, "text": t, "search_text": analysed(t, True), "source": f"d{r}", "title": "",
             "kind": "text", "symbol": "", "line_start": -1, "line_end": -1, "text_hash": f"{r:x}",
             "doc_hash": f"{r:x}", "tenant": "default", "dense": v.tolist()}
            for r, t, v in zip(rows, texts, vectors)]


def build_collection(n: int, cache: Path) -> dict:
    """The cached N-row collection (built when missing); its state file."""
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus_client import stop_lite_server
    from ragsieve.tools.index.milvus_publish import create_collection

    folder = cache / f"milvus-rows-{n}"
    state_file = folder / "state.json"
    if state_file.is_file():
        return json.loads(state_file.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    client = MilvusClient(str(folder / "milvus.db"))
    create_collection(client, COLLECTION, DIM, "FLAT")
    rng = np.random.default_rng(n)
    t0 = time.perf_counter()
    for start in range(0, n, 5000):
        rows = list(range(start, min(n, start + 5000)))
        vectors = rng.standard_normal((len(rows), DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        client.insert(COLLECTION, _entities(rows, _texts(rng, len(rows)), vectors, 1))
        if start % 100_000 == 0:
            print(f"  {n}: {start + len(rows)} rows, {time.perf_counter() - t0:.0f}s", flush=True)
    client.flush(COLLECTION)
    client.load_collection(COLLECTION)
    state = {"chunks": n, "visible": 1, "retired_ids": [], "build_s": round(time.perf_counter() - t0, 1)}
    client.close()
    stop_lite_server(str(folder / "milvus.db"))  # release the file (milvus-lite: one process per file)
    _save(state_file, state)
    return state


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


class _Store:
    def __init__(self, chunks: dict) -> None:
        self.chunks = chunks

    def get_many(self, rows):
        return [self.chunks[r] for r in rows]

    def documents(self) -> dict:
        return {c.doc_id: f"edited-{c.doc_id}" for c in self.chunks.values()}


class _Vectors:
    def __init__(self, rows: dict) -> None:
        self.rows = rows

    def __getitem__(self, rows):
        return np.stack([self.rows[r] for r in rows])


class OneDocGeneration:
    """What `milvus_rows.entities` reads of a local generation, for the one changed row (the rest of the local
    index is not consulted by an incremental publish)."""

    manifest: dict = {}

    def __init__(self, row: int, text: str, vector: np.ndarray) -> None:
        from ragsieve.tools.types import Chunk

        self.store = _Store({row: Chunk(doc_id=f"d{row}", chunk_index=0, text=text, source=f"d{row}")})
        self.vectors = _Vectors({row: vector})


def _edit_rows(n: int) -> list[int]:
    return [n // 2, n // 3, n // 5]


def publish_changes(n: int, cache: Path, changes: int = 3, cold: bool = False) -> dict:
    """`changes` one-document publishes on the cached N-row collection, each timed by step.

    warm (`cold=False`): the collection is loaded (timed apart) and each retired row's live entity is looked up
    by a filtered query, as a publish without a `born` record does. cold: a new process that never loads the
    collection, the retired entity known beforehand (as `milvus_born` rebuilds it from the previous local
    generation): what `ragsieve index` pays per publish on milvus-lite. The edited rows' live entities are kept
    in the state file (the benchmark's own born record)."""
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus_client import stop_lite_server
    from ragsieve.tools.index.milvus_delta import ALL_FIELDS, apply_delta, recover
    from ragsieve.tools.index.milvus_rows import visible_at

    state_file = cache / f"milvus-rows-{n}" / "state.json"
    state = json.loads(state_file.read_text())
    t0 = time.perf_counter()
    client = MilvusClient(str(state_file.parent / "milvus.db"))
    open_s = time.perf_counter() - t0
    load_s = None
    live = {int(k): v for k, v in state.get("live", {}).items()}
    if not cold:
        t0 = time.perf_counter()
        client.load_collection(COLLECTION)
        load_s = time.perf_counter() - t0
        missing = [r for r in _edit_rows(n) if r not in live]
        if missing:
            base = int(state["visible"])
            for e in client.query(COLLECTION, filter=f"{visible_at(base)} and row in {missing}",
                                  output_fields=ALL_FIELDS):
                live[int(e["row"])] = {k: (list(map(float, e[k])) if k == "dense" else e[k]) for k in ALL_FIELDS}
    elif any(r not in live for r in _edit_rows(n)):
        raise SystemExit("run the warm pass first (it records the edited rows' live entities)")
    rng = np.random.default_rng(state["visible"])
    runs = []
    for k in range(changes):
        base, gen = int(state["visible"]), int(state["visible"]) + 1
        row = _edit_rows(n)[k % 3]
        vector = rng.standard_normal(DIM).astype(np.float32)
        local = OneDocGeneration(row, f"edited {gen} " + _texts(rng, 1)[0], vector / np.linalg.norm(vector))
        t0 = time.perf_counter()
        recovery = recover(client, COLLECTION, base, undo=False, expired=state["retired_ids"])
        t1 = time.perf_counter()
        counts = apply_delta(client, COLLECTION, local, base, gen, {row}, {row}, "default", True,
                             known=[live[row]] if cold else None)
        t2 = time.perf_counter()
        from ragsieve.tools.index.milvus_rows import entities

        live[row] = entities(local, [row], "default", True, gen)[0]
        state.update(visible=gen, retired_ids=counts["retired_ids"], live={str(r): e for r, e in live.items()})
        _save(state_file, state)  # the pointer switch
        t3 = time.perf_counter()
        runs.append({"row": row, "publish_s": round(t3 - t0, 3), "recover_s": round(t1 - t0, 3),
                     "apply_delta_s": round(t2 - t1, 3), "switch_s": round(t3 - t2, 4),
                     "rows_written": counts["rows_written"], "rows_retired": counts["rows_retired"],
                     "expired_deleted": recovery["expired"], "text": local.store.chunks[row].text})
    print("RUNS " + json.dumps({"chunks": n, "cold": cold, "process_open_s": round(open_s, 2), "runs": runs,
                                "load_collection_s": None if load_s is None else round(load_s, 2)}), flush=True)
    if n > VERIFY_MAX:  # loading 1M rows in milvus-lite took 15 GB here (the OOM killer stopped it): not checked
        client.close()
        stop_lite_server(str(state_file.parent / "milvus.db"))
        for r in runs:
            r.pop("text")
        return {"chunks": n, "mode": "cold (no load, no query)" if cold else "warm (loaded, query)",
                "collection_build_s": state.get("build_s"), "process_open_s": round(open_s, 2),
                "load_collection_s": None if load_s is None else round(load_s, 2), "runs": runs,
                "publish_s_median": float(np.median([r["publish_s"] for r in runs])), "verified": False}
    t0 = time.perf_counter()
    client.load_collection(COLLECTION)  # checking (not timed as publish): each edit visible, once
    verify_load_s = time.perf_counter() - t0
    gen = int(state["visible"])
    for r in runs:
        seen = client.query(COLLECTION, filter=f"{visible_at(gen)} and row == {r['row']}", output_fields=["text"])
        r["reader_sees_latest_text"] = len(seen) == 1 and (seen[0]["text"] == live[r["row"]]["text"])
        r.pop("text")
    total = client.query(COLLECTION, filter=visible_at(gen), output_fields=["count(*)"])
    client.close()
    stop_lite_server(str(state_file.parent / "milvus.db"))
    return {"chunks": n, "mode": "cold (no load, no query)" if cold else "warm (loaded, query)",
            "collection_build_s": state.get("build_s"), "process_open_s": round(open_s, 2),
            "load_collection_s": None if load_s is None else round(load_s, 2),
            "load_collection_s_after": round(verify_load_s, 2), "runs": runs,
            "publish_s_median": float(np.median([r["publish_s"] for r in runs])),
            "visible_rows_after": int(total[0]["count(*)"]) if total else None}


def main() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from scale_publish import commit

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-scale-cache")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: "SIZE:warm|cold" in a fresh process
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale_publish_milvus.json")
    args = ap.parse_args()
    if args.one:
        size, mode = args.one.split(":")
        print("RESULT " + json.dumps(publish_changes(int(size), args.cache, args.changes, cold=mode == "cold")))
        return
    sizes = [int(x) for x in args.sizes.split(",") if x]
    result = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix().split("ragsieve/")[-1]] + sys.argv[1:]),
              "commit": commit(), "cpus": os.cpu_count(), "load_average_at_start": os.getloadavg(),
              "engine": "milvus-lite (one file per size), FLAT dense index, INVERTED on row/born/died",
              "vectors": "synthetic random unit vectors; the document's embedding is not included", "sizes": {}}
    for n in sizes:
        state = build_collection(n, args.cache)
        print(f"collection {n}: ready ({state.get('build_s')} s to build)", flush=True)
    if args.build_only:
        return
    for n in sizes:
        row = {}
        for mode in ("warm", "cold"):  # each in a new process: a CLI publish on milvus-lite starts its own server
            out = subprocess.run([sys.executable, __file__, "--one", f"{n}:{mode}", "--changes", str(args.changes),
                                  "--cache", str(args.cache)], capture_output=True, text=True, timeout=7200)
            found = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if not found:
                raise SystemExit(f"{n} {mode} failed:\n{out.stderr[-3000:]}")
            row[mode] = json.loads(found[-1][7:]) | {"load_average": os.getloadavg()}
            print(f"publish {n} {mode}: {json.dumps(row[mode])}", flush=True)
        result["sizes"][str(n)] = row
    for mode in ("warm", "cold"):
        med = {n: result["sizes"][n][mode]["publish_s_median"] for n in result["sizes"]}
        if med:
            result[f"{mode}_largest_over_smallest"] = round(med[max(med, key=int)] / med[min(med, key=int)], 2)
    result["load_average_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
