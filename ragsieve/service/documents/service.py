"""The documents API's state: the catalog, the ingestion queue, and the registry it keeps serving."""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from pathlib import Path

from ragsieve.service.documents.catalog import Catalog, write_json
from ragsieve.service.documents.expiry import TOUCH_EVERY_S, expired_stores
from ragsieve.service.documents.filters import equal_all
from ragsieve.service.documents.ingest import Ingestor
from ragsieve.service.documents.job_store import JobStore
from ragsieve.service.documents.views import last_error
from ragsieve.tools.index.search.where import Where

log = logging.getLogger(__name__)
SYNC_S = 1.0  # how often stores created or deleted by another worker process are looked for


class Documents:
    """Files and vector stores of one server (`--data-dir`); vector stores with an index are served."""

    def __init__(self, registry, settings, config) -> None:
        self.registry, self.settings = registry, settings
        served = {name: Path(live.folder) for name, live in registry.orchestrators.items()}
        self.catalog = Catalog(settings.data_dir, served)
        self._embedders: dict[str, object] = {}
        self._lock = threading.Lock()
        self._serving = threading.RLock()  # the ingestion worker and the sync thread add and remove stores
        self.jobs = JobStore(settings.data_dir)
        self.ingestor = Ingestor(self.catalog, config, self._built, self._embedder_for, settings.ingest_queue, store=self.jobs)
        registry.store_name = lambda store_id: (self.catalog.store(store_id) or {}).get("name")
        self.sync()  # stores created before a restart are served again
        for name, live in registry.orchestrators.items():
            live.resolve_where = partial(self.resolve_where, name)
        for store in self.catalog.stores():  # files a restart interrupted are ingested again (by one worker)
            for entry in self.catalog.entries(store["id"]):
                if entry["status"] == "in_progress" and self.jobs.claim(self._claim_key(store["id"], entry)):
                    self.queue_add(store["id"], entry, claimed=True)
        self._stop = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="ragsieve-store-sync", daemon=True)
        self._syncer.start()

    @staticmethod
    def _claim_key(store_id: str, entry: dict) -> str:
        return f"{store_id}/{entry['id']}/{entry.get('_attached') or entry['created_at']}"

    def queue_add(self, store_id: str, entry: dict, claimed: bool = False, batch_member: bool = False) -> dict:
        """Queue the ingestion of a store's file; its record says `completed` or `failed` when the job ends
        (`cancelled` when its batch was cancelled first: then it is not built, or taken out again)."""
        key = self._claim_key(store_id, entry)
        if not claimed:
            self.jobs.claim(key)

        def mine(current: dict) -> bool:
            return (current.get("_attached"), current["created_at"]) == (entry.get("_attached"), entry["created_at"])

        def wanted() -> bool:
            current = self.catalog.entry(store_id, entry["id"])
            return current is not None and mine(current) and current["status"] == "in_progress"

        def done(job: dict) -> None:
            def change(current: dict) -> dict | None:
                if not mine(current) or current["status"] != "in_progress":
                    return None
                current["status"] = "completed" if job["error"] is None else "failed"
                current["last_error"] = None if job["error"] is None else last_error(job["error"])
                return current

            try:
                if job["status"] == "cancelled":
                    return
                after = self.catalog.update_entry(store_id, entry["id"], change)
                if job["error"] is None and after is not None and mine(after) and after["status"] == "cancelled":
                    self.ingestor.submit("remove", store_id, file_id=entry["id"])  # cancelled while it was built
                # (a file detached meanwhile is taken out by the removal its detaching queued)
            finally:
                self.jobs.release(key)

        try:
            return self.ingestor.submit("add", store_id, batch_member=batch_member, file_id=entry["id"], done=done, wanted=wanted)
        except Exception:
            self.jobs.release(key)
            raise

    def store_ids(self) -> set[str]:
        return {s["id"] for s in self.catalog.stores()}

    # -- stores made or deleted by another worker process (`serve --workers N`) -----------------
    def sync(self) -> None:
        """Serve the stores with an index that this process does not serve yet; stop serving deleted ones."""
        with self._serving:
            self._sync()

    def _sync(self) -> None:
        for store in self.catalog.stores():
            sid = store["id"]
            if sid not in self.registry.orchestrators and (self.catalog.index_dir(sid) / "CURRENT").is_file():
                try:
                    self.registry.add(sid, self.catalog.index_dir(sid))
                except Exception as exc:  # being written or deleted right now: the next round
                    log.debug("vector store %s is not served yet: %s", sid, exc)
                    continue
                self.registry.orchestrators[sid].resolve_where = partial(self.resolve_where, sid)
        for sid in [s for s in self.registry.orchestrators if s.startswith("vs_")]:
            if self.catalog.store(sid) is None or not (self.catalog.index_dir(sid) / "CURRENT").is_file():
                self.registry.remove(sid)  # deleted, or its last file removed, by another worker

    def _sync_loop(self) -> None:
        rounds = 0
        while not self._stop.wait(SYNC_S):
            rounds += 1
            try:
                self.sync()
                if rounds % int(TOUCH_EVERY_S / SYNC_S) == 1:
                    self.reap()
            except Exception:  # pragma: no cover - logged, the next round tries again
                log.exception("following the vector stores of other workers failed")

    # -- called by the ingestion worker ------------------------------------------------
    def _embedder_for(self, store_id: str, model: str):
        live = self.registry.orchestrators.get(store_id)
        if live is not None and live.index.model_name == model:
            return live.index.embedder  # the model the server already loaded
        with self._lock:
            if model not in self._embedders:
                for other in list(self.registry.orchestrators.values()):
                    if other.index.model_name == model:
                        self._embedders[model] = other.index.embedder
                        break
                else:
                    from ragsieve.tools.index.embedders.local_embedder import Embedder

                    self._embedders[model] = Embedder(model)
            return self._embedders[model]

    def _built(self, store_id: str, removed: bool = False) -> None:
        """A job published a generation: serve it now (not at the next watch round)."""
        with self._serving:
            self._serve_built(store_id, removed)

    def _serve_built(self, store_id: str, removed: bool) -> None:
        if removed or self.catalog.store(store_id) is None:  # emptied, or deleted while the job ran
            self.registry.remove(store_id)
            if not removed:
                self.catalog.delete_store(store_id)
            return
        live = self.registry.orchestrators.get(store_id)
        if live is None:
            self.registry.add(store_id, self.catalog.index_dir(store_id))
            self.registry.orchestrators[store_id].resolve_where = partial(self.resolve_where, store_id)
        else:
            live.refresh(force=True)

    # -- attributes as metadata ------------------------------------------------------------
    def file_prefixes(self, store_id: str, keep) -> tuple[str, ...]:
        return tuple(
            f"{e['id']}/"
            for e in self.catalog.entries(store_id)
            if e["status"] == "completed" and keep(e.get("attributes") or {})
        )

    def resolve_where(self, store_id: str, where: Where | None) -> Where | None:
        """`where.attributes` (equality on file attributes) becomes the prefixes of the files that match."""
        if where is None or not where.attributes:
            return where
        prefixes = self.file_prefixes(store_id, lambda attrs: equal_all(where.attributes, attrs))
        if where.prefixes is not None:
            prefixes = tuple(p for p in prefixes if p.startswith(where.prefixes))
        return where.model_copy(update={"attributes": None, "prefixes": prefixes})

    def usage_bytes(self, store_id: str) -> int:
        return sum(e.get("usage_bytes", 0) for e in self.catalog.entries(store_id) if e["status"] == "completed")

    def touch(self, store_id: str) -> None:
        """The store was used: its `last_active_at` (which `expires_after` counts from) is written at most
        once a minute per process."""
        now = int(time.time())
        self._active = getattr(self, "_active", {})
        written = self._active.get(store_id)
        self._active[store_id] = now
        if store_id in self.catalog.served or (written is not None and now - written < TOUCH_EVERY_S):
            return
        with self.catalog.locked():
            meta = self.catalog.store(store_id)
            if meta is not None:
                write_json(self.catalog.store_dir(store_id) / "meta.json", meta | {"last_active_at": now})

    def last_active(self, store_id: str) -> int | None:
        meta = self.catalog.store(store_id) or {}
        return max(getattr(self, "_active", {}).get(store_id) or 0, meta.get("last_active_at") or 0) or None

    def reap(self) -> list[str]:
        """Delete the vector stores past their `expires_at`."""
        gone = expired_stores(self.catalog)
        for store_id in gone:
            with self._serving:
                self.registry.remove(store_id)
                self.catalog.delete_store(store_id)
            log.info("vector store %s expired and was deleted", store_id)
        return gone

    def close(self) -> None:
        if hasattr(self, "_stop"):
            self._stop.set()
            self._syncer.join(5)
        self.ingestor.close()
        self.jobs.close()
