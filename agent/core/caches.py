"""What the steps compute once and reuse across questions, typed and guarded by locks.

An `Orchestrator` hands one `StepCaches` to every question it answers, and the service answers
questions on several threads at once: each slot holds one (key, value) pair, read and replaced
under its lock. A value is computed outside the lock (two threads may both compute it; the last
write stays), so a slow computation never blocks the other questions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generic, Hashable, TypeVar

import numpy as np

if TYPE_CHECKING:  # the steps import this module; the calibration store imports the judging package
    from ragsieve.agent.calibration.store import Calibration
    from ragsieve.agent.core.contracts import Reranker

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Slot(Generic[K, V]):
    """One remembered (key, value): a lookup with another key misses, a store replaces it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entry: tuple[K, V] | None = None

    def peek(self, key: K) -> V | None:
        """The value stored under `key`, else None."""
        with self._lock:
            entry = self._entry
        return entry[1] if entry is not None and entry[0] == key else None

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._entry = (key, value)
        return value

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value under `key`, computed (outside the lock) and stored when missing."""
        with self._lock:
            entry = self._entry
        if entry is not None and entry[0] == key:
            return entry[1]
        return self.put(key, compute())


@dataclass
class StepCaches:
    """`reranker`: a reranker the caller gives the fallback step (tests, an application), else None; the
    slots: the lenient fallback reranker by its settings, COS-Mix's R by index size, the sparse rows'
    nearest-neighbour similarities by rows, the whole-corpus conformal signal by (index, question, kind),
    and the index's calibration by (file, modification time)."""

    reranker: Reranker | None = None
    lenient_reranker: Slot[tuple, Reranker] = field(default_factory=Slot)
    rest_rows: Slot[int, list[int]] = field(default_factory=Slot)
    sparse_nn: Slot[tuple[int, ...], np.ndarray] = field(default_factory=Slot)
    corpus_signal: Slot[tuple, np.ndarray] = field(default_factory=Slot)
    calibration: Slot[tuple[str, int | None], tuple[Calibration | None, list[str]]] = field(default_factory=Slot)
