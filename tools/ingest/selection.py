"""Which files of a folder are indexed: `--include` / `--exclude` globs and documented default excludes.

Patterns are gitignore-style (`pathspec`): `genindex*.html` matches at any
depth, `_static/` matches a folder, `docs/**/*.md` is anchored at the indexed
folder. Defaults skip what is almost never an answer: build output (Sphinx
`_sources`, `_static`, `genindex`, `searchindex.js`), minified or generated
files, lock files and vendored folders. `--no-default-excludes` turns them off;
a file matching an `--include` pattern is read even when a default would skip it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pathspec

from ragsieve.tools.errors import UsageError

DEFAULT_EXCLUDES: dict[str, list[str]] = {
    "build output": [
        "_sources/",
        "_static/",
        "_images/",
        ".doctrees/",
        "genindex*.html",
        "searchindex.js",
        "search.html",
        "py-modindex.html",
        "objects.inv",
        ".buildinfo",
        "_build/doctrees/",
    ],
    "minified or generated": [
        "*.min.js",
        "*.min.css",
        "*.js.map",
        "*.css.map",
        "*.bundle.js",
        "*_pb2.py",
        "*_pb2_grpc.py",
        "*.pb.go",
        "*.generated.*",
    ],
    "lock file": [
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Pipfile.lock",
        "Cargo.lock",
        "go.sum",
        "composer.lock",
        "Gemfile.lock",
        "uv.lock",
    ],
    "vendored": ["vendor/", "third_party/", "site-packages/", ".tox/", ".mypy_cache/", ".pytest_cache/", ".ragsieve*/"],
}


def _spec(patterns: list[str], what: str) -> pathspec.PathSpec:
    try:
        return pathspec.PathSpec.from_lines("gitignore", patterns)
    except Exception as exc:  # pathspec raises GitWildMatchPatternError (a ValueError) or others
        raise UsageError(f"invalid {what} pattern in {patterns}: {exc}") from None


@dataclass
class Selection:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    default_excludes: bool = True

    def __post_init__(self) -> None:
        self._include = _spec(self.include, "--include") if self.include else None
        self._exclude = _spec(self.exclude, "--exclude") if self.exclude else None
        self._defaults = [(why, _spec(p, "default")) for why, p in DEFAULT_EXCLUDES.items()] if self.default_excludes else []

    def skip_folder(self, rel: str) -> str | None:
        """Why the folder `rel` (relative to the indexed folder) is not entered, or None."""
        path = rel.rstrip("/") + "/"
        if self._exclude is not None and self._exclude.match_file(path):
            return "excluded by --exclude"
        if self._include is None:
            for why, spec in self._defaults:
                if spec.match_file(path):
                    return f"skipped by default ({why}; --no-default-excludes or --include to keep)"
        return None

    def skip_file(self, rel: str) -> str | None:
        """Why the file `rel` is not read, or None."""
        if self._exclude is not None and self._exclude.match_file(rel):
            return "excluded by --exclude"
        included = self._include is not None and self._include.match_file(rel)
        if self._include is not None and not included:
            return "not matched by --include"
        if not included:
            for why, spec in self._defaults:
                if spec.match_file(rel):
                    return f"skipped by default ({why}; --no-default-excludes or --include to keep)"
        return None
