"""The collection `scale_publish_milvus.py` publishes into, and one timed one-document publish: N synthetic
one-chunk documents in a cached milvus-lite file (`build_collection`), the benchmark's state file (the pointer
and born record), and `one_change`: exactly the calls `milvus.publish` makes in incremental mode."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

COLLECTION = "chunks"
DIM = 384
CACHE = [Path(tempfile.gettempdir()) / "ragsieve-scale-cache"]


def STATE(n: int) -> Path:  # noqa: N802
    return CACHE[0] / f"milvus-rows-{n}" / "state.json"


def synthetic_texts(rng, n: int) -> list[str]:
    vocab = [f"w{i}" for i in range(20000)]
    return [" ".join(vocab[w] for w in rng.zipf(1.3, 20) % len(vocab)) for _ in range(n)]


def entities_of(rows: list[int], texts: list[str], vectors: np.ndarray, generation: int) -> list[dict]:
    from ragsieve.tools.index.milvus.rows import ALIVE, primary_key
    from ragsieve.tools.index.milvus.schema import analysed

    return [{"pk": primary_key(generation, r), "row": r, "born": generation, "died": ALIVE, "doc_id": f"d{r}",
             "chunk_index": 0, "text": t, "search_text": analysed(t, True), "source": f"d{r}", "title": "",
             "kind": "text", "symbol": "", "line_start": -1, "line_end": -1, "text_hash": f"{r:x}",
             "doc_hash": f"{r:x}", "tenant": "default", "dense": v.tolist()}
            for r, t, v in zip(rows, texts, vectors)]


def build_collection(n: int, cache: Path) -> dict:
    """The cached N-row collection (built when missing); its state file."""
    from pymilvus import MilvusClient

    from ragsieve.tools.index.milvus.client import stop_lite_server
    from ragsieve.tools.index.milvus.schema import create_collection

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
        client.insert(COLLECTION, entities_of(rows, synthetic_texts(rng, len(rows)), vectors, 1))
        if start % 100_000 == 0:
            print(f"  {n}: {start + len(rows)} rows, {time.perf_counter() - t0:.0f}s", flush=True)
    client.flush(COLLECTION)
    client.load_collection(COLLECTION)
    state = {"chunks": n, "visible": 1, "retired_ids": [], "build_s": round(time.perf_counter() - t0, 1)}
    client.close()
    stop_lite_server(str(folder / "milvus.db"))  # release the file (milvus-lite: one process per file)
    save_state(state_file, state)
    return state


def save_state(path: Path, state: dict) -> None:
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
    """What `milvus.rows.entities` reads of a local generation, for the one changed row (the rest of the local
    index is not consulted by an incremental publish)."""

    manifest: dict = {}

    def __init__(self, row: int, text: str, vector: np.ndarray) -> None:
        from ragsieve.tools.types import Chunk

        self.store = _Store({row: Chunk(doc_id=f"d{row}", chunk_index=0, text=text, source=f"d{row}")})
        self.vectors = _Vectors({row: vector})


def edit_rows(n: int) -> list[int]:
    return [n // 2, n // 3, n // 5]


def one_change(client, state: dict, live: dict, n: int, k: int, rng, cold: bool, migrate: bool = False) -> dict:
    """One one-document publish, timed by step: exactly the calls `milvus.publish` makes in incremental mode
    (`cold`: the retired entity known from the born record; else looked up; `migrate`: then the born record read
    from the collection, as the first publish of a pointer from before the record does)."""
    from ragsieve.tools.index.milvus.born import born_from_collection
    from ragsieve.tools.index.milvus.delta import apply_delta, recover
    from ragsieve.tools.index.milvus.rows import entities

    base, gen = int(state["visible"]), int(state["visible"]) + 1
    row = edit_rows(n)[k % 3]
    vector = rng.standard_normal(DIM).astype(np.float32)
    local = OneDocGeneration(row, f"edited {gen} " + synthetic_texts(rng, 1)[0], vector / np.linalg.norm(vector))
    t0 = time.perf_counter()
    present = client.has_collection(COLLECTION)  # the publish's first call (its `same` check)
    t1 = time.perf_counter()
    recovery = recover(client, COLLECTION, base, undo=False, expired=state["retired_ids"])
    t2 = time.perf_counter()
    counts = apply_delta(client, COLLECTION, local, base, gen, {row}, {row}, "default", True,
                         known=[live[row]] if cold else None)
    t3 = time.perf_counter()
    if migrate:
        _, born = born_from_collection(client, COLLECTION, gen)
        migrate_s, migrated_rows = round(time.perf_counter() - t3, 3), len(born)
    t3m = time.perf_counter()
    live[row] = entities(local, [row], "default", True, gen)[0]
    state.update(visible=gen, retired_ids=counts["retired_ids"], live={str(r): e for r, e in live.items()})
    save_state(STATE(n), state)  # the pointer switch
    t4 = time.perf_counter()
    assert present
    return {"row": row, "publish_s": round(t4 - t0, 3), "first_call_s": round(t1 - t0, 3),
            "recover_s": round(t2 - t1, 3), "apply_delta_s": round(t3 - t2, 3), "switch_s": round(t4 - t3m, 4),
            "rows_written": counts["rows_written"], "rows_retired": counts["rows_retired"],
            "expired_deleted": recovery["expired"], "text": local.store.chunks[row].text,
            **({"migrate_born_s": migrate_s, "born_rows_recorded": migrated_rows} if migrate else {})}


def live_entities(state: dict) -> dict:
    return {int(k): v for k, v in state.get("live", {}).items()}
