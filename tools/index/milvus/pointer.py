"""The files beside a Milvus-backed index: the pointer `milvus.json` (its atomic rewrite is the publish's
switch), the publish intent, the per-generation row files under `milvus-sparse/`, and the stored URI."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ragsieve.tools.errors import IndexMissingError

POINTER = "milvus.json"
SPARSE_DIR = "milvus-sparse"
INTENT = "milvus-publishing.json"  # the collection a full publish is writing, until the switch


def read_pointer(root: Path) -> dict:
    try:
        return json.loads((Path(root) / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexMissingError(f"index {root}: {POINTER} is missing or damaged ({exc})") from None


def write_pointer(root: Path, pointer: dict) -> None:
    tmp = root / f".{POINTER}.tmp"
    tmp.write_text(json.dumps(pointer, indent=2), encoding="utf-8")
    os.replace(tmp, root / POINTER)


def write_sparse(root: Path, gen: str, rows: Iterable[int]) -> str:
    """The COS-Mix sparse rows of generation `gen` beside the pointer (`milvus-sparse/<gen>.npy`): the subset is
    recomputed from all vectors each generation, so it lives in one small file, not in every entity."""
    folder = root / SPARSE_DIR
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{gen}.npy.tmp"
    with open(tmp, "wb") as fh:
        np.save(fh, np.asarray(sorted(rows), dtype=np.int64))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / f"{gen}.npy")
    return f"{SPARSE_DIR}/{gen}.npy"


def stored_uri(root: Path, uri: str) -> str:
    """How the pointer records `uri`: a server URI as given; a milvus-lite file inside the index folder relative
    to it (a copied or moved index then uses its own copy), any other file as an absolute path."""
    if "://" in uri:
        return uri
    path = Path(uri).expanduser().resolve()
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


def resolve_uri(root: Path, stored: str) -> str:
    """The URI a client opens for a pointer's `uri` (a relative file is relative to the index folder)."""
    if "://" in stored or Path(stored).is_absolute():
        return stored
    inside = Path(root).resolve() / stored
    if not inside.exists() and Path(stored).exists():  # a pointer written before: relative to the build's cwd
        return str(Path(stored).resolve())
    return str(inside)


def write_intent(root: Path, intent: dict) -> None:
    """Before writing to Milvus, say what: a publish killed before the switch leaves it here (a full copy's
    collection to drop, or an incremental publish's rows to undo)."""
    tmp = root / f".{INTENT}.tmp"
    tmp.write_text(json.dumps(intent), encoding="utf-8")
    os.replace(tmp, root / INTENT)
