"""The generation folders of an index: numbering, durability and the atomic switch of `CURRENT`.

A build writes `gen-<n>/`, fsyncs it (`fsync_tree`), then `switch_current` replaces
`CURRENT` atomically (temp file + os.replace + fsync of the folder) and only then
deletes the generations other than the new one and the one it replaced, so a
reader that read the old `CURRENT` just before the switch still finds its files;
a generation a running server still reads is left to it (`readers`).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.index.local.index import CURRENT, current_generation

log = logging.getLogger(__name__)

GENERATION = re.compile(r"^gen-(\d+)$")


def new_generation(root: Path) -> Path:
    """Create and return the next `gen-<n>` folder of `root`."""
    root.mkdir(parents=True, exist_ok=True)
    numbers = [int(m.group(1)) for p in root.iterdir() if (m := GENERATION.match(p.name))]
    gen = root / f"gen-{max(numbers, default=0) + 1}"
    gen.mkdir()
    return gen


def live_generation(root: Path) -> Path | None:
    """The generation `CURRENT` names, or None when the index has none yet."""
    try:
        return current_generation(root)
    except IndexMissingError:
        return None


def fsync_tree(folder: Path) -> None:
    """fsync every file and folder below `folder`; a hard-linked file (an incremental generation's older
    segments) was synced by the generation that wrote it, so only its new folder entry is synced."""
    for path in sorted(folder.rglob("*")) + [folder]:
        if path.is_file() and path.stat().st_nlink > 1:
            continue
        _fsync(path)


def switch_current(root: Path, gen: Path, keep: Path | None = None) -> None:
    """Point CURRENT at `gen` atomically, then delete the generations other than `gen` and `keep`."""
    tmp = root / f".{CURRENT}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(gen.name + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / CURRENT)
    log.info("index %s: CURRENT -> %s", root, gen.name)
    _fsync(root)
    from ragsieve.tools.index.local.readers import sweep

    sweep(root, {gen.name, keep.name if keep else ""})  # a generation a reader holds stays (`readers`)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
