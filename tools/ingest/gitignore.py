"""`.gitignore` rules for skipping files while scanning folders, matched by `pathspec`.

Each line is compiled by pathspec's `GitIgnoreSpecPattern` (git's own
semantics: comments, `\\#`/`\\!` escapes, `!` negation, trailing `/` for
directories, anchoring by a leading or inner `/`, `*`, `?`, `[...]`, `**`).
pathspec collapses runs of `**/` into one group, so matching stays linear in
the path length however many `**/` a line repeats. A line that does not
compile (e.g. `[z-a]`) is reported and skipped; it never stops a scan.
Nested `.gitignore` files apply below their folder and win over their
parents; within one file the last matching pattern wins. As in git, a file
below an ignored directory cannot be re-included: the scanner never descends
into ignored directories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

MAX_GITIGNORE_BYTES = 1_000_000
MAX_PATTERN_CHARS = 4096


class BadPattern(ValueError):
    """A `.gitignore` line that cannot be compiled."""


@dataclass(frozen=True)
class IgnoreRule:
    """One parsed pattern of one `.gitignore` file."""

    pattern: str
    compiled: GitIgnoreSpecPattern
    negated: bool
    dir_only: bool
    origin: str  # "path/to/.gitignore:line" for messages

    def matches(self, rel_path: str, is_dir: bool) -> bool:
        """Whether `rel_path` (posix, relative to the rule's folder) matches."""
        if self.compiled.match_file(rel_path) is not None:
            return not self.dir_only or is_dir
        if not is_dir:
            return False
        # a folder also matches a directory-only pattern through pathspec's trailing-slash group,
        # but not `abc/**` (which means "everything inside abc", as in git)
        found = self.compiled.match_file(rel_path + "/")
        return found is not None and found.match.groupdict().get("ps_d") is not None


def parse_line(line: str, origin: str = "") -> IgnoreRule | None:
    """Parse one `.gitignore` line into a rule; `None` for comments and blanks; `BadPattern` if invalid."""
    line = line.rstrip("\n").rstrip("\r")
    if len(line) > MAX_PATTERN_CHARS:
        raise BadPattern(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    try:
        compiled = GitIgnoreSpecPattern(line)
    except (re.error, ValueError, TypeError) as exc:
        raise BadPattern(f"invalid pattern {line!r}: {exc}") from None
    if compiled.include is None:
        return None
    shown = line.rstrip(" ")
    return IgnoreRule(
        pattern=shown, compiled=compiled, negated=compiled.include is False, dir_only=shown.endswith("/"), origin=origin
    )


def parse_gitignore(text: str, origin: str = "", bad: list[tuple[str, str]] | None = None) -> list[IgnoreRule]:
    """The rules of one `.gitignore` text, in file order; invalid lines go to `bad` as (origin, why)."""
    rules = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{origin}:{number}" if origin else str(number)
        try:
            rule = parse_line(line, where)
        except BadPattern as exc:
            if bad is not None:
                bad.append((where, str(exc)))
            continue
        if rule is not None:
            rules.append(rule)
    return rules


@dataclass(frozen=True)
class IgnoreSet:
    """The `.gitignore` rules in force in one folder: (folder, rules) pairs, outermost first."""

    layers: tuple[tuple[Path, tuple[IgnoreRule, ...]], ...] = ()

    def child(self, folder: Path, bad: list[tuple[str, str]] | None = None) -> "IgnoreSet":
        """The rules in force in `folder`: these plus `folder/.gitignore` if it exists and is readable."""
        path = folder / ".gitignore"
        try:
            if not path.is_file():
                return self
            with open(path, "rb") as fh:
                raw = fh.read(MAX_GITIGNORE_BYTES + 1)
        except OSError as exc:
            if bad is not None:
                bad.append((path.as_posix(), f"unreadable .gitignore: {exc.strerror or exc}"))
            return self
        if len(raw) > MAX_GITIGNORE_BYTES and bad is not None:
            bad.append((path.as_posix(), f"only the first {MAX_GITIGNORE_BYTES} bytes are read"))
        text = raw[:MAX_GITIGNORE_BYTES].decode("utf-8", errors="replace")
        rules = tuple(parse_gitignore(text, origin=path.as_posix(), bad=bad))
        return IgnoreSet(self.layers + ((folder, rules),)) if rules else self

    def match(self, path: Path, is_dir: bool) -> IgnoreRule | None:
        """The rule that ignores `path`, or `None` when it is not ignored.

        The last matching rule wins, deeper files over shallower ones; a
        matching negation means "not ignored".
        """
        decision: IgnoreRule | None = None
        for folder, rules in self.layers:
            try:
                rel = path.relative_to(folder).as_posix()
            except ValueError:
                continue
            for rule in rules:
                if rule.matches(rel, is_dir):
                    decision = rule
        if decision is None or decision.negated:
            return None
        return decision
