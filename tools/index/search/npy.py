"""`np.load` behind one process-wide lock.

Reading a `.npy` header calls `ast.literal_eval`; CPython 3.11 (3.11.7 here) can fail with
"SystemError: AST constructor recursion depth mismatch" when two threads do that at once, which a
live server does: a question opens a generation while a publish reads another (seen in
`tests/core/test_milvus_incremental.py`'s reader loop). Loading is header parsing plus a memory map, so the lock costs nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal

import numpy as np

_LOCK = threading.Lock()


def load(path: str | Path, mmap_mode: Literal["r+", "r", "w+", "c"] | None = None) -> np.ndarray:
    with _LOCK:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
