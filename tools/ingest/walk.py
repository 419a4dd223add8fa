"""Finding the files to index: folders walked in sorted order, ignore rules applied, skips counted.

Folders are walked iteratively (an explicit stack, so depth never exhausts
Python's recursion), honouring `.gitignore` files found in the scanned folders
(`ragsieve.tools.ingest.gitignore`) and never entering `.git`, `.venv`,
`node_modules` or `__pycache__`. Files named explicitly are always read.
Symlinked folders are not followed, and only the `.gitignore` files at or
below a scanned folder apply (not its parents').

Nothing found on the way is fatal: a name that is not valid UTF-8, a broken
or looping symlink, an unreadable file or folder, a FIFO, socket or device,
a folder deeper than `MAX_DEPTH` or an invalid ignore pattern is counted,
named with its reason in `LoadStats.skipped`, and skipped.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragsieve.tools.errors import UsageError
from ragsieve.tools.ingest.gitignore import IgnoreSet

if TYPE_CHECKING:
    from ragsieve.tools.ingest.selection import Selection

ALWAYS_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})
MAX_DEPTH = 256  # folders below this many levels under a scanned folder are skipped, named


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
    skipped_unreadable: int = 0  # permissions, I/O errors, symlink loops, corrupt archives
    skipped_special: int = 0  # FIFOs, sockets, devices, symlinked folders
    skipped_bad_names: int = 0  # names that are not valid UTF-8
    skipped_too_deep: int = 0
    skipped_too_large: int = 0
    skipped_missing_extra: int = 0  # a reader extra not installed (the reason names the pip install)
    skipped_excluded: int = 0  # --include / --exclude / the default excludes (ragsieve.tools.ingest.selection)
    bad_ignore_patterns: int = 0
    decoded_with_replacement: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    PROBLEMS = (
        "skipped_missing_extra",
        "skipped_unreadable",
        "skipped_special",
        "skipped_bad_names",
        "skipped_too_deep",
        "skipped_too_large",
        "bad_ignore_patterns",
    )

    def summary(self) -> str:
        """One line for humans."""
        line = (
            f"{self.documents} documents from {self.files_loaded} of {self.files_seen} files; "
            f"skipped {self.skipped_binary} binary, {self.skipped_empty} empty, "
            f"{self.skipped_ignored} gitignored, {self.skipped_excluded} excluded, "
            f"{self.skipped_unsupported} unsupported, "
            f"{self.skipped_records} bad records; "
            f"{self.decoded_with_replacement} decoded with replacement characters"
        )
        problems = [
            f"{getattr(self, name)} {name.replace('skipped_', '').replace('_', ' ')}"
            for name in self.PROBLEMS
            if getattr(self, name)
        ]
        return line + (f"; problems: {', '.join(problems)}" if problems else "")

    def problems(self) -> list[tuple[str, str]]:
        """The skipped paths a user should look at (not the ordinary binary/empty/ignored/unsupported)."""
        return [(p, r) for p, r in self.skipped if r.startswith(_PROBLEM_PREFIXES)]

    def _skip(self, counter: str, path: str, reason: str) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        self.skipped.append((path, reason))


_PROBLEM_PREFIXES = (
    "needs the",
    "unreadable",
    "special file",
    "name is not UTF-8",
    "too deep",
    "too large",
    "bad ignore pattern",
    "symlink",
    "corrupt",
)


def printable(path: str | Path) -> str:
    """A path as text that always encodes: undecodable bytes shown as \\xNN escapes."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", errors="backslashreplace")


def display_path(path: Path) -> str:
    """The stable id of a file: posix, relative to the cwd when under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def name_ok(path: Path) -> bool:
    """Whether the path is valid UTF-8 (sqlite, JSON and terminals need it)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_regular(path: Path, stats: LoadStats) -> bool:
    """Whether `path` is a readable regular file (following symlinks); else counted and named."""
    shown = printable(display_path(path))
    if not name_ok(path):
        stats._skip("skipped_bad_names", shown, "name is not UTF-8")
        return False
    try:
        st = os.stat(path)
    except OSError as exc:
        kind = "symlink loop or broken symlink" if os.path.islink(path) else "unreadable"
        stats._skip("skipped_unreadable", shown, f"{kind}: {exc.strerror or exc}")
        return False
    if not stat.S_ISREG(st.st_mode):
        stats._skip("skipped_special", shown, f"special file ({_kind(st.st_mode)}), not read")
        return False
    return True


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _entries(folder: Path, stats: LoadStats) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        stats._skip("skipped_unreadable", printable(display_path(folder)), f"unreadable folder: {exc.strerror or exc}")
        return []


def source_root(path: str | Path) -> Path:
    """Where ids are counted from when an index is first built: the enclosing git checkout of `path`,
    else the folder holding it (so `examples` gives ids `examples/...`)."""
    start = Path(os.path.abspath(path))
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start.parent


def doc_id_for(root: Path, path: Path, base: Path | None = None) -> str:
    """A file's id: its path below `base` (the index's source root) when under it, else the indexed
    folder's name then the path below it (`examples/docs/a.md`); the same from any working directory."""
    if base is not None:
        try:
            return Path(os.path.abspath(path)).relative_to(base).as_posix()
        except ValueError:
            pass
    if root == path:
        return path.name
    name = Path(os.path.abspath(root)).name
    rel = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(root))).as_posix()
    return f"{name}/{rel}" if name else rel


def walk_folder(folder: Path, ignores: IgnoreSet, stats: LoadStats, selection: Selection | None = None) -> Iterator[Path]:
    """Files under `folder`, sorted depth-first, with skipped entries counted and pruned."""
    bad: list[tuple[str, str]] = []

    def enter(path: Path, parent: IgnoreSet, depth: int) -> tuple[Iterator[os.DirEntry[str]], IgnoreSet, int]:
        child = parent.child(path, bad)
        for where, why in bad:
            stats._skip("bad_ignore_patterns", printable(where), f"bad ignore pattern skipped: {why}")
        bad.clear()
        return iter(_entries(path, stats)), child, depth

    stack = [enter(folder, ignores, 0)]
    while stack:
        entries, layer, depth = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_link = entry.is_symlink()
        except OSError as exc:
            stats._skip("skipped_unreadable", printable(display_path(path)), f"unreadable: {exc.strerror or exc}")
            continue
        if is_dir and entry.name in ALWAYS_SKIPPED_DIRS:
            continue
        if not name_ok(path):
            stats._skip("skipped_bad_names", printable(display_path(path)), "name is not UTF-8")
            continue
        rule = layer.match(path, is_dir)
        if rule is not None:
            stats._skip("skipped_ignored", display_path(path), f"gitignored by {rule.pattern!r} ({rule.origin})")
            continue
        if selection is not None:
            rel = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(folder))).as_posix()
            why = selection.skip_folder(rel) if is_dir else selection.skip_file(rel)
            if why is not None:
                stats._skip("skipped_excluded", display_path(path), why)
                continue
        if is_dir:
            if depth + 1 > MAX_DEPTH:
                stats._skip("skipped_too_deep", display_path(path), f"too deep: more than {MAX_DEPTH} levels")
                continue
            stack.append(enter(path, layer, depth + 1))
            continue
        if is_link and os.path.isdir(path):
            stats._skip("skipped_special", display_path(path), "special file (symlinked folder), not followed")
            continue
        if check_regular(path, stats):
            yield path


def collect_files(
    paths: list[str | Path], stats: LoadStats, selection: Selection | None = None, base: Path | None = None
) -> list[tuple[Path, str, str]]:
    """(file, doc id, path below the folder given) for every file to read under `paths`."""
    missing = [printable(p) for p in paths if not os.path.lexists(p)]
    if missing:
        raise UsageError(f"path(s) not found: {', '.join(missing)}")
    files: list[tuple[Path, str, str]] = []
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found: Iterator[Path] = walk_folder(path, IgnoreSet(), stats, selection)
        else:
            found = iter([path]) if check_regular(path, stats) else iter([])
        for file in found:
            key = os.path.abspath(file)
            if key not in seen:
                seen.add(key)
                below = (
                    file.name if file == path else Path(os.path.abspath(file)).relative_to(Path(os.path.abspath(path))).as_posix()
                )
                files.append((file, doc_id_for(path, file, base), below))
    return files
