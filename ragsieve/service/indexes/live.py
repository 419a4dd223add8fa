"""Live indexes: a running server follows the generations an index publishes, without a restart.

`LiveOrchestrator` stands where the service kept one `Orchestrator` per index.
Each question pins the generation that is current when it starts and finishes
on it (no mixed answers); a newer generation — written by the server's own
jobs, or by `ragsieve index` / a re-crawl / `ragsieve migrate` in another
process — is opened in the background and serves every question that starts
after the switch. The old one is closed when its last question ends, and its
folder deleted then if no reader anywhere still holds it (`readers`). What
announces a new generation: `CURRENT` (local) or `milvus.json` (the Milvus
pointer, switched by `ragsieve migrate`).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ragsieve.tools.index.local.generations import CURRENT, current_generation
from ragsieve.tools.index.local.index import HybridIndex
from ragsieve.tools.index.local.readers import ReaderLease, remove_unless_read

if TYPE_CHECKING:  # the orchestrator is opened by the caller's `open_orch`
    from ragsieve.agent.orchestrator import Orchestrator

log = logging.getLogger(__name__)

CHECK_S = 0.5  # how often a question may look for a new generation (a stat or two)
POINTERS = ("milvus.json", CURRENT)


def version(root: Path) -> str:
    """What names the live generation of `root`: the Milvus pointer when published there, else CURRENT."""
    for name in POINTERS:
        try:
            return f"{name}:{(root / name).read_text(encoding='utf-8').strip()}"
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, UnicodeDecodeError):
            return ""
    return ""


class _Generation:
    def __init__(self, token: str, orch: Orchestrator) -> None:
        self.token, self.orch, self.refs, self.retired = token, orch, 0, False
        index = orch.index  # a local generation folder is held while read (Milvus: none to hold)
        self.path = Path(index.path) if isinstance(index, HybridIndex) else None
        self.lease = ReaderLease(self.path) if self.path is not None else None
        self.opened = time.time()


class LiveOrchestrator:
    """The orchestrator of the live generation of `folder`; `open_orch(embedder)` opens one."""

    resolve_where: Callable | None = None  # set by the documents API: file attributes -> source prefixes

    def __init__(self, folder: str | Path, open_orch: Callable[..., Orchestrator], check_s: float = CHECK_S) -> None:
        self.folder = Path(folder)
        self._open = open_orch
        self.check_s = check_s
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        self._checked = time.monotonic()
        self.switches = 0
        self.last_error: str | None = None
        self._current = self._load(None)

    def _load(self, embedder) -> _Generation:
        token = version(self.folder)
        orch = self._open(embedder)
        return _Generation(token, orch)

    # -- following the index ---------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """Switch to a newer generation when one was published; True when it switched. Never blocks a caller
        behind another's load: the one loading switches, the others go on with the current generation."""
        now = time.monotonic()
        if not force and now - self._checked < self.check_s:
            return False
        self._checked = now
        if version(self.folder) == self._current.token:
            return False
        if not self._loading.acquire(blocking=False):
            return False
        try:
            old = self._current
            try:
                new = self._load(getattr(old.orch.index, "_embedder", None))  # the loaded model is shared
            except Exception as exc:  # a broken or half-deleted generation: keep answering from the old one
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "index %s: the new generation did not open (%s); still serving the previous one", self.folder, self.last_error
                )
                return False
            with self._lock:
                self._current, old.retired = new, True
                idle = old.refs == 0
            self.switches += 1
            self.last_error = None
            log.info("index %s: now answering from %s", self.folder, new.token)
            if idle:
                self._close(old)
            return True
        finally:
            self._loading.release()

    def _acquire(self) -> _Generation:
        self.refresh()
        with self._lock:
            gen = self._current
            gen.refs += 1
            return gen

    def _release(self, gen: _Generation) -> None:
        with self._lock:
            gen.refs -= 1
            done = gen.retired and gen.refs == 0
        if done:
            self._close(gen)

    def _close(self, gen: _Generation) -> None:
        try:
            gen.orch.close()
        except Exception:  # pragma: no cover - closing is best effort
            log.exception("closing generation %s of %s failed", gen.token, self.folder)
        if gen.lease is not None:
            gen.lease.release()
        if gen.path is not None and gen.path.exists():
            try:
                live = current_generation(self.folder)
            except Exception:
                live = None
            if live is not None and live.name != gen.path.name:
                remove_unless_read(gen.path)

    @contextmanager
    def pinned(self) -> Iterator[Orchestrator]:
        """The orchestrator of the current generation, held (not closed, not deleted) until the block ends."""
        gen = self._acquire()
        try:
            yield gen.orch
        finally:
            self._release(gen)

    # -- the Orchestrator surface the service uses -------------------------------
    def ask(self, *args, **kwargs):
        with self.pinned() as orch:
            return orch.ask(*args, **self._resolved(kwargs))

    def retrieve(self, *args, **kwargs):
        with self.pinned() as orch:
            return orch.retrieve(*args, **self._resolved(kwargs))

    def _resolved(self, kwargs: dict) -> dict:
        where = kwargs.get("where")
        if where is not None and where.attributes and self.resolve_where is not None:
            kwargs["where"] = self.resolve_where(where)
        return kwargs

    @property
    def generation(self) -> str:
        return self._current.token.partition(":")[2]

    @property
    def opened(self) -> float:
        return self._current.opened

    def __getattr__(self, name: str):  # config, index, prompts ...: those of the current generation
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._current.orch, name)

    def close(self) -> None:
        with self._lock:
            gen = self._current
            gen.retired = True
            idle = gen.refs == 0
        if idle:
            self._close(gen)


class Watcher:
    """A daemon thread that checks every `interval_s` whether an index published a new generation, so the
    first question after a publish does not pay for opening it."""

    def __init__(self, indexes: Callable[[], list[LiveOrchestrator]], interval_s: float = 1.0) -> None:
        self._indexes, self.interval_s = indexes, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ragsieve-index-watch", daemon=True)

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for live in self._indexes():
                try:
                    live.refresh(force=True)
                except Exception:  # pragma: no cover - the next round tries again
                    log.exception("watching %s failed", live.folder)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)
