"""Embedding checkpoints: a killed build resumes embedding where it stopped.

While a build embeds, every finished batch group is written to
`<index>/.embed-checkpoint/part-<n>.npz` (temp file + `os.replace`, so a part
is whole or absent) holding each text's sha1 and its vector. The next build
of the same index with the same model reads the parts back and embeds only
texts it has no vector for. A successful publish deletes the folder.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
FOLDER = ".embed-checkpoint"


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class EmbedCheckpoint:
    """Saved vectors of one index for one model; `lookup` before embedding, `save` after each batch group."""

    def __init__(self, index_root: Path, model: str) -> None:
        self.folder = Path(index_root) / FOLDER
        self.model = model
        self._parts = 0

    def lookup(self) -> dict[str, np.ndarray]:
        """text sha1 -> vector for every saved part of this model (damaged parts are skipped, logged)."""
        found: dict[str, np.ndarray] = {}
        meta = self.folder / "model.json"
        if not meta.is_file():
            return found
        try:
            if json.loads(meta.read_text(encoding="utf-8")).get("model") != self.model:
                return found
        except (OSError, ValueError):
            return found
        for part in sorted(self.folder.glob("part-*.npz")):
            try:
                with np.load(part, allow_pickle=False) as data:
                    for key, vec in zip(data["keys"], data["vectors"]):
                        found[str(key)] = vec
            except (OSError, ValueError, KeyError) as exc:
                log.warning("embedding checkpoint %s unreadable, ignored: %s", part, exc)
            self._parts += 1
        return found

    def save(self, keys: list[str], vectors: np.ndarray) -> None:
        """Write one part; a failure (disk full, read-only) is logged and the build goes on without it."""
        if not keys:
            return
        try:
            self._save(keys, vectors)
        except OSError as exc:
            log.warning("embedding checkpoint not written (%s); an interrupted build would re-embed", exc)

    def _save(self, keys: list[str], vectors: np.ndarray) -> None:
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True)
        meta = self.folder / "model.json"
        if not meta.is_file():
            meta.write_text(json.dumps({"model": self.model}), encoding="utf-8")
        while (self.folder / f"part-{self._parts:06d}.npz").exists():
            self._parts += 1
        target = self.folder / f"part-{self._parts:06d}.npz"
        tmp = self.folder / f".tmp-{self._parts:06d}.npz"
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=np.array(keys), vectors=np.asarray(vectors, dtype=np.float32))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        self._parts += 1

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
