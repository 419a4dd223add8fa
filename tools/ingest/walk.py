"""Finding the files to index: folders walked in sorted order, ignore rules applied, skips counted.

Folders are walked recursively, honouring `.gitignore` files found in the scanned
folders (`ragsieve.tools.ingest.gitignore`) and never entering `.git`, `.venv`,
`node_modules` or `__pycache__`. Files named explicitly are always read. Symlinked
folders are not followed, and only the `.gitignore` files at or below a scanned
folder apply (not its parents').
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.gitignore import IgnoreSet

ALWAYS_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})


@dataclass
class LoadStats:
    """What `load_documents` saw and why anything was left out."""

    files_seen: int = 0
    files_loaded: int = 0
    documents: int = 0
    skipped_binary: int = 0
    skipped_empty: int = 0
    skipped_ignored: int = 0
    skipped_unsupported: int = 0
    skipped_records: int = 0
    decoded_with_replacement: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        """One line for humans."""
        return (
            f"{self.documents} documents from {self.files_loaded} of {self.files_seen} files; "
            f"skipped {self.skipped_binary} binary, {self.skipped_empty} empty, "
            f"{self.skipped_ignored} gitignored, {self.skipped_unsupported} unsupported, "
            f"{self.skipped_records} bad records; "
            f"{self.decoded_with_replacement} decoded with replacement characters"
        )

    def _skip(self, counter: str, path: str, reason: str) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        self.skipped.append((path, reason))


def display_path(path: Path) -> str:
    """The stable id of a file: posix, relative to the cwd when under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def walk_folder(folder: Path, ignores: IgnoreSet, stats: LoadStats) -> Iterator[Path]:
    """Files under `folder`, sorted, with gitignored entries counted and pruned."""
    ignores = ignores.child(folder)
    with os.scandir(folder) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and entry.name in ALWAYS_SKIPPED_DIRS:
            continue
        if not is_dir and not entry.is_file():
            continue
        rule = ignores.match(path, is_dir)
        if rule is not None:
            stats._skip("skipped_ignored", display_path(path), f"gitignored by {rule.pattern!r} ({rule.origin})")
            continue
        if is_dir:
            yield from walk_folder(path, ignores, stats)
        else:
            yield path


def collect_files(paths: list[str | Path], stats: LoadStats) -> list[Path]:
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"path(s) not found: {', '.join(missing)}")
    files: list[Path] = []
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        found = walk_folder(path, IgnoreSet(), stats) if path.is_dir() else iter([path])
        for file in found:
            key = os.path.abspath(file)
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files
