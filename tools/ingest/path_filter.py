"""Which files of a folder to index: `--include` / `--exclude` globs and the default excludes.

Patterns are gitignore-style globs (pathspec) matched against the path
relative to the indexed folder: `_static/` matches that folder anywhere,
`docs/*.html` only under a top-level `docs`, `**/gen/*.py` at any depth.
The defaults skip what is built, vendored, generated, minified or locked
rather than written: Sphinx build output (`_sources/` copies of every page,
`genindex*.html`, `_static/`, `searchindex.js`), minified assets, source
maps, lock files, vendored folders and generated protobuf code. Every skip
names the pattern and whether it was a default, so the summary says what was
left out and why; `use_defaults=False` (`--no-default-excludes`) turns the
defaults off, and an `--include` pattern wins over a default exclude.
"""
from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from ragsieve.tools.errors import UsageError

DEFAULT_EXCLUDES: dict[str, str] = {
    "_sources/": "Sphinx page sources (duplicates of the HTML)",
    "genindex*.html": "Sphinx general index",
    "py-modindex.html": "Sphinx module index",
    "search.html": "Sphinx search page",
    "searchindex.js": "Sphinx search index",
    "_static/": "Sphinx static assets",
    ".doctrees/": "Sphinx build cache",
    "*.min.js": "minified asset",
    "*.min.css": "minified asset",
    "*.map": "source map",
    "package-lock.json": "lock file",
    "yarn.lock": "lock file",
    "pnpm-lock.yaml": "lock file",
    "poetry.lock": "lock file",
    "Pipfile.lock": "lock file",
    "Cargo.lock": "lock file",
    "composer.lock": "lock file",
    "go.sum": "lock file",
    "uv.lock": "lock file",
    "vendor/": "vendored code",
    "third_party/": "vendored code",
    "*_pb2.py": "generated code",
    "*_pb2_grpc.py": "generated code",
    "*.pb.go": "generated code",
    "*.generated.*": "generated code",
}


def _compile(pattern: str) -> GitIgnoreSpecPattern:
    if not isinstance(pattern, str) or not pattern.strip() or pattern.strip().startswith("!"):
        raise UsageError(f"invalid glob {pattern!r}: give a non-empty pattern such as '*.py' or 'docs/' "
                         "(no '!' negation; use --include)")
    try:
        return GitIgnoreSpecPattern(pattern.strip())
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a bad glob
        raise UsageError(f"invalid glob {pattern!r}: {exc}") from None


@dataclass
class PathFilter:
    """Include/exclude globs; `why_skipped` says which pattern leaves a path out, or None."""

    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    use_defaults: bool = True

    def __post_init__(self) -> None:
        self._include = [(p, _compile(p)) for p in self.include]
        self._exclude = [(p, _compile(p)) for p in self.exclude]
        self._defaults = [(p, _compile(p)) for p in DEFAULT_EXCLUDES] if self.use_defaults else []
        self.skipped: Counter[str] = Counter()  # reason -> count

    @staticmethod
    def _hit(rules, rel: str) -> str | None:
        return next((p for p, rule in rules if rule.match_file(rel) is not None), None)

    def why_skipped(self, rel_path: str, is_dir: bool) -> str | None:
        """The reason `rel_path` (posix, relative to the indexed folder) is not indexed, or None."""
        rel = rel_path + "/" if is_dir else rel_path
        if (p := self._hit(self._exclude, rel)) is not None:
            return self._count(f"excluded by --exclude {p!r}")
        included = bool(self._include) and not is_dir and self._hit(self._include, rel) is not None
        if not included and (p := self._hit(self._defaults, rel)) is not None:
            return self._count(f"excluded by default {p!r} ({DEFAULT_EXCLUDES[p]})")
        if self._include and not is_dir and not included:
            return self._count("not matched by --include")
        return None

    def _count(self, reason: str) -> str:
        self.skipped[reason] += 1
        return reason

    def summary(self) -> str:
        """`12 excluded by default '_sources/' (...), 3 not matched by --include`, or ''."""
        return ", ".join(f"{n} {reason}" for reason, n in self.skipped.most_common())


def matches_any(doc_id: str, selectors: list[str]) -> bool:
    """Whether `doc_id` is one of `selectors`: an exact id, a prefix ending in '/' (a folder or
    site), or a glob with `*`, `?` or `[` (fnmatch, `*` crossing '/')."""
    for sel in selectors:
        if doc_id == sel or (sel.endswith("/") and doc_id.startswith(sel)):
            return True
        if any(ch in sel for ch in "*?[") and fnmatch.fnmatchcase(doc_id, sel):
            return True
    return False
