"""The generation folders of an index: numbering, durability and the atomic switch of `CURRENT`.

A build writes `gen-<n>/`, fsyncs it (`fsync_tree`), then `switch_current` replaces
`CURRENT` atomically (temp file + os.replace + fsync of the folder) and only then
deletes the generations other than the new one and the one it replaced, so a
reader that read the old `CURRENT` just before the switch still finds its files;
a generation a running server still reads is left to it (`ragsieve.tools.index.local.readers`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from ragsieve.tools import tracing
from ragsieve.tools.errors import IndexMissingError
from ragsieve.tools.index.local.readers import remove_unless_read

log = logging.getLogger(__name__)

GENERATION = re.compile(r"^gen-(\d+)$")
CURRENT = "CURRENT"
MANIFEST = "manifest.json"


def current_generation(root: Path) -> Path | None:
    """The generation folder CURRENT points at, or None when there is no CURRENT file."""
    pointer = root / CURRENT
    if not pointer.is_file():
        return None
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise IndexMissingError(f"index {root}: cannot read {CURRENT} ({exc}); rebuild with --rebuild") from None
    if not name or "/" in name or "\\" in name or name.startswith(".") or len(name) > 255:
        raise IndexMissingError(f"index {root}: CURRENT holds an invalid generation name {name!r}")
    return root / name


def read_manifest(gen: Path) -> dict:
    try:
        manifest = json.loads((gen / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexMissingError(f"index generation {gen} is incomplete: no {MANIFEST}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise IndexMissingError(f"index generation {gen}: {MANIFEST} is not valid JSON ({exc})") from None
    try:
        model = manifest["embedding"]["model"]
        if not isinstance(model, str):
            raise TypeError("embedding.model is not a string")
    except (KeyError, TypeError) as exc:
        raise IndexMissingError(f"index generation {gen}: {MANIFEST} is malformed ({exc!r} missing or wrong)") from None
    return manifest


def layout_of(gen: Path) -> str:
    """`segments` for an incremental generation, else `generation` (also when its manifest is unreadable)."""
    try:
        return json.loads((gen / MANIFEST).read_text(encoding="utf-8")).get("layout", "generation")
    except (OSError, ValueError, AttributeError):
        return "generation"


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


@tracing.traced("ragsieve.build.publish")  # a build phase's span (docs/tracing.md)
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
    sweep(root, {gen.name, keep.name if keep else ""})  # a generation a reader holds stays (`readers`)


def sweep(root: Path, keep: set[str]) -> list[str]:
    """Delete the generations of `root` not named in `keep` that no reader holds; their names."""
    removed = []
    for old in Path(root).iterdir():
        if GENERATION.match(old.name) and old.name not in keep and remove_unless_read(old):
            removed.append(old.name)
    return removed


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
