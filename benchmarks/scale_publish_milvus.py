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
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
COLLECTION = "chunks"
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


def publish_changes(n: int, cache: Path, changes: int = 3) -> dict:
    """`changes` one-document publishes on the cached N-row collection, each timed by step."""
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus_client import stop_lite_server
    from ragsieve.tools.index.milvus_delta import apply_delta, recover
    from ragsieve.tools.index.milvus_rows import visible_at

    state_file = cache / f"milvus-rows-{n}" / "state.json"
    state = json.loads(state_file.read_text())
    t0 = time.perf_counter()
    client = MilvusClient(str(state_file.parent / "milvus.db"))
    client.load_collection(COLLECTION)
    open_s = time.perf_counter() - t0
    rng = np.random.default_rng(state["visible"])
    runs = []
    for k in range(changes):
        base, gen = int(state["visible"]), int(state["visible"]) + 1
        row = int(rng.integers(0, n))
        vector = rng.standard_normal(DIM).astype(np.float32)
        local = OneDocGeneration(row, f"edited {gen} " + _texts(rng, 1)[0], vector / np.linalg.norm(vector))
        t0 = time.perf_counter()
        recovery = recover(client, COLLECTION, base, undo=False, expired=state["retired_ids"])
        t1 = time.perf_counter()
        counts = apply_delta(client, COLLECTION, local, base, gen, {row}, {row}, "default", True)
        t2 = time.perf_counter()
        state.update(visible=gen, retired_ids=counts["retired_ids"])
        _save(state_file, state)  # the pointer switch
        t3 = time.perf_counter()
        seen = client.query(COLLECTION, filter=f"{visible_at(gen)} and row == {row}", output_fields=["text"])
        runs.append({"row": row, "publish_s": round(t3 - t0, 3), "recover_s": round(t1 - t0, 3),
                     "apply_delta_s": round(t2 - t1, 3), "switch_s": round(t3 - t2, 4),
                     "rows_written": counts["rows_written"], "rows_retired": counts["rows_retired"],
                     "expired_deleted": recovery["expired"],
                     "reader_sees_new_text": len(seen) == 1 and seen[0]["text"].startswith(f"edited {gen} ")})
    total = client.query(COLLECTION, filter=visible_at(int(state["visible"])), output_fields=["count(*)"])
    client.close()
    stop_lite_server(str(state_file.parent / "milvus.db"))
    return {"chunks": n, "collection_build_s": state.get("build_s"), "open_and_load_s": round(open_s, 2),
            "runs": runs, "publish_s_median": float(np.median([r["publish_s"] for r in runs])),
            "visible_rows_after": int(total[0]["count(*)"]) if total else None}


def main() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from scale_publish import commit

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-scale-cache")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale_publish_milvus.json")
    args = ap.parse_args()
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
        result["sizes"][str(n)] = publish_changes(n, args.cache, args.changes)
        print(f"publish {n}: {json.dumps(result['sizes'][str(n)])}", flush=True)
        result["load_average_after_" + str(n)] = os.getloadavg()
    med = {n: result["sizes"][n]["publish_s_median"] for n in result["sizes"]}
    if med:
        smallest, largest = min(med, key=int), max(med, key=int)
        result["largest_over_smallest"] = round(med[largest] / med[smallest], 2)
    result["load_average_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
