"""Ingestion as a bounded background job: files into vector stores, removals, crawls — through the index builder.

One worker thread writes; the builder's own lock also orders it with `ragsieve
index` runs in other processes, and every write is a new atomic generation the
server then switches to (`ragsieve.service.indexes.live`). Files queued for the
same store while the worker was busy are built together (one generation).
At most `limit` jobs wait; more are refused (429). A file that cannot be read
ends `failed` with its reason; the others still land. Each change of a job's
state is written to the `JobStore`, so any worker process reports it.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from ragsieve.service.documents.catalog import new_id
from ragsieve.tools.errors import RagsieveError, UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.change_plan import has_outside, has_prefix
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.store import ChunkStore
from ragsieve.tools.ingest.loaders import kind_of

log = logging.getLogger(__name__)

BATCH = 64  # files of one store built together at most
KEEP_JOBS = 1000  # finished jobs remembered in memory (all workers read them from the `JobStore`)
PROGRESS_EVERY_S = 1.0  # a running job's progress is written at most this often


class QueueFull(Exception):
    pass


class StoreBuilder(IndexBuilder):
    """The builder with the store's `docs/` folder as the source root of a new index, so a file's id and
    citation source is `<file-id>/<filename>` wherever the data folder lives."""

    def __init__(self, *args, docs_root: Path, **kwargs):
        super().__init__(*args, **kwargs)
        self.docs_root = Path(docs_root).resolve()

    def _source_root(self, paths, rebuild: bool):
        gen = None if rebuild else current_generation(self.root)
        if gen is None:
            self._new_root = self.docs_root
            return self.docs_root
        return super()._source_root(paths, rebuild)


def job_view(job: dict) -> dict:
    """The job as `GET /v1/jobs/{id}` shows it (no callbacks)."""
    return {k: v for k, v in job.items() if k != "params"} | {
        "params": {k: v for k, v in job["params"].items() if not callable(v)}
    }


def why_missing(folder: Path) -> str:
    """Why a staged file left no document: a type `ragsieve index` does not read (which the walk skips
    without a problem line), or nothing extractable in it."""
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if names and kind_of(folder / names[0]) is None:
        return (
            f"unsupported file type {Path(names[0]).suffix or names[0]!r}: ragsieve reads text, Markdown, HTML, "
            f"PDF, DOCX, notebooks, JSON lines and source code"
        )
    return "no text could be extracted from the file"


def indexed_files(index_dir: Path, file_ids) -> tuple[set[str], bool]:
    """Which of `file_ids` have a document in the store's current generation, and (for one file id)
    whether it holds a document of any other file: range probes on the doc_id index, never a listing of
    the store's documents (an upload to a large store costs the same as to a small one)."""
    gen = current_generation(index_dir) if index_dir.is_dir() else None
    if gen is None:
        return set(), False
    file_ids = list(file_ids)
    with ChunkStore(gen / "chunks.sqlite", read_only=True) as store:
        found = {fid for fid in file_ids if has_prefix(store, fid + "/")}
        others = len(file_ids) == 1 and has_outside(store, file_ids[0] + "/")
    return found, others


class Ingestor:
    """The job queue and its worker; `on_built(store_id)` tells the registry to serve the new generation."""

    def __init__(self, catalog, config, on_built, embedder_for, limit: int = 64, store=None) -> None:
        self.catalog, self.config, self.on_built, self.embedder_for = catalog, config, on_built, embedder_for
        self.limit = limit
        self.store = store  # a `JobStore`: the jobs' state for every worker process
        self.jobs: dict[str, dict] = {}
        self._queue: deque[dict] = deque()
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="ragsieve-ingest", daemon=True)
        self._thread.start()

    # -- submitting --------------------------------------------------------------
    def submit(self, kind: str, store_id: str, *, batch_member: bool = False, **params) -> dict:
        """Queue a job, or raise QueueFull when `limit` wait. A file batch, admitted as a whole while the queue
        had room (`batch_member`), may take it past `limit` by up to its size (500 at most)."""
        with self._cv:
            if not batch_member and len(self._queue) >= self.limit:
                raise QueueFull(f"{self.limit} ingestion jobs are already waiting; retry later")
            job: dict[str, Any] = {
                "id": new_id("job_"),
                "object": "job",
                "kind": kind,
                "index": store_id,
                "status": "queued",
                "created_at": int(time.time()),
                "started_at": None,
                "finished_at": None,
                "progress": {},
                "error": None,
                "result": None,
                "params": params,
            }
            self.jobs[job["id"]] = job
            self._record(job)
            self._queue.append(job)
            while len(self.jobs) > KEEP_JOBS + len(self._queue):
                oldest = next(i for i, j in self.jobs.items() if j["status"] not in ("queued", "running"))
                del self.jobs[oldest]
            self._cv.notify()
            return job

    def _record(self, job: dict) -> None:
        if self.store is not None:
            try:
                self.store.put(job_view(job))
            except Exception:  # pragma: no cover - a full disk: the job goes on, its state is logged
                log.exception("recording job %s failed", job["id"])

    def get(self, job_id: str) -> dict | None:
        """The job's state, whichever worker process runs it."""
        if self.store is not None:
            return self.store.get(job_id)
        job = self.jobs.get(job_id)
        return None if job is None else job_view(job)

    def pending(self) -> int:
        with self._cv:
            return len(self._queue)

    # -- the worker ----------------------------------------------------------------
    def _take(self) -> list[dict] | None:
        with self._cv:
            while not self._queue and not self._stop:
                self._cv.wait(1.0)
            if self._stop:
                return None
            first = self._queue.popleft()
            batch = [first]
            if first["kind"] == "add":
                for job in list(self._queue):
                    if len(batch) >= BATCH:
                        break
                    if job["kind"] == "add" and job["index"] == first["index"]:
                        self._queue.remove(job)
                        batch.append(job)
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            batch = self._wanted(batch)
            if not batch:
                continue
            for job in batch:
                job["status"], job["started_at"] = "running", int(time.time())
                self._record(job)
            try:
                getattr(self, f"_do_{batch[0]['kind']}")(batch)
                for job in batch:
                    job["status"] = "completed" if job["error"] is None else "failed"
            except Exception as exc:  # the job fails, the worker and the server go on
                log.warning("ingestion job %s failed: %s", batch[0]["id"], exc)
                for job in batch:
                    job["status"], job["error"] = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                for job in batch:
                    job["finished_at"] = int(time.time())
                    self._record(job)
                self._after(batch)
                if self.store is not None:
                    self.store.prune()

    def _wanted(self, batch: list[dict]) -> list[dict]:
        """The jobs still wanted: one whose file was cancelled meanwhile (`params["wanted"]()` false) ends
        `cancelled` without being built."""
        keep = []
        for job in batch:
            wanted = job["params"].get("wanted")
            if wanted is None or wanted():
                keep.append(job)
                continue
            job["status"], job["finished_at"] = "cancelled", int(time.time())
            self._record(job)
        self._after([j for j in batch if j not in keep])
        return keep

    def _after(self, batch: list[dict]) -> None:
        for job in batch:
            callback = job["params"].get("done")
            if callback is not None:
                try:
                    callback(job)
                except Exception:  # pragma: no cover - a record write failed; logged
                    log.exception("recording the end of job %s failed", job["id"])

    def builder(self, store_id: str) -> StoreBuilder:
        ic = self.config.index
        index_dir = self.catalog.index_dir(store_id)
        gen = current_generation(index_dir) if index_dir.is_dir() else None
        manifest = read_manifest(gen) if gen is not None else {}
        model = manifest.get("embedding", {}).get("model") or ic.embedding_model
        return StoreBuilder(
            index_dir,
            docs_root=self.catalog.docs_dir(store_id),
            chunk_tokens=manifest.get("chunk_tokens") or ic.chunk_tokens,
            embedding_model=model,
            faiss_index=ic.faiss_index,
            bm25_engine=ic.bm25_engine,
            batch_size=ic.embed_batch_size,
            sparse_percentile=ic.sparse_percentile,
            progress=False,
            lock_wait_s=ic.lock_wait_s,
            embedder=self.embedder_for(store_id, model),
            encoder=ic.encoder,
        )

    def _do_add(self, batch: list[dict]) -> None:
        store_id = batch[0]["index"]
        folders = {job["params"]["file_id"]: self.catalog.docs_dir(store_id) / job["params"]["file_id"] for job in batch}
        problems: dict[str, str] = {}
        try:
            report = self.builder(store_id).build([str(f) for f in folders.values()])
            problems = {p: why for p, why in report.problems}
            for job in batch:
                job["result"] = {"generation": report.generation, "chunks_total": report.chunks_total}
        except UsageError as exc:  # nothing in the batch could be read
            problems = {"*": str(exc)}
        present, _ = indexed_files(self.catalog.index_dir(store_id), [job["params"]["file_id"] for job in batch])
        for job in batch:
            fid = job["params"]["file_id"]
            if fid not in present:
                # this file's own problem line, else why it left no document; a build that read nothing at
                # all ("*") says so once for the batch, which must not give every file the same reason
                why = next((w for p, w in problems.items() if fid in p), None)
                job["error"] = why or why_missing(folders[fid])
        if any(job["error"] is None for job in batch):
            self.on_built(store_id)

    def _do_remove(self, batch: list[dict]) -> None:
        job = batch[0]
        store_id, fid = job["index"], job["params"]["file_id"]
        index_dir = self.catalog.index_dir(store_id)
        present, others = indexed_files(index_dir, [fid])
        if fid not in present:
            return  # never indexed (it failed) or already gone
        if not others and store_id not in self.catalog.served:
            self.on_built(store_id, removed=True)  # the store's last file: the index goes, not an empty generation
            shutil.rmtree(index_dir, ignore_errors=True)
            return
        self.builder(store_id).remove([fid])
        self.on_built(store_id)

    def _do_crawl(self, batch: list[dict]) -> None:
        job = batch[0]
        options = dict(job["params"]["crawl"])

        written = [0.0]

        def progress(done: int, known: int, url: str) -> None:
            job["progress"] = {"pages_done": done, "pages_known": known, "last_url": url}
            if time.monotonic() - written[0] >= PROGRESS_EVERY_S:
                written[0] = time.monotonic()
                self._record(job)

        options["progress"] = progress
        try:
            report = self.builder(job["index"]).build([job["params"]["url"]], crawl=options)
        except RagsieveError as exc:
            job["error"] = str(exc)
            return
        job["result"] = {
            "generation": report.generation,
            "chunks_total": report.chunks_total,
            "docs_added": report.docs_added,
            "docs_updated": report.docs_updated,
            "docs_removed": report.docs_removed,
            "problems": report.problems[:50],
        }
        self.on_built(job["index"])

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)
