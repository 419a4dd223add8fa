"""The common subset of `.gitignore` semantics, for skipping files while scanning folders.

Supported (see `git help gitignore`): comments and blank lines, `\\#`/`\\!`
escapes, trailing-space trimming, `!` negation, a trailing `/` matching
directories only, anchoring by a leading or inner `/`, `*`, `?`, `[...]`
classes (with `!`/`^` negation) and `**` (leading `**/`, inner `/**/`,
trailing `/**`). Nested `.gitignore` files apply below their folder and win
over their parents; within one file the last matching pattern wins. As in
git, a file below an ignored directory cannot be re-included: the scanner
never descends into ignored directories.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IgnoreRule:
    """One parsed pattern of one `.gitignore` file."""

    pattern: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    origin: str  # "path/to/.gitignore:line" for messages

    def matches(self, rel_path: str, is_dir: bool) -> bool:
        """Whether `rel_path` (posix, relative to the rule's folder) matches."""
        if self.dir_only and not is_dir:
            return False
        return self.regex.fullmatch(rel_path) is not None


def _translate_class(pat: str, i: int) -> tuple[str, int]:
    """Translate the `[...]` class starting at `pat[i]`; return (regex, next index)."""
    j = i + 1
    if j < len(pat) and pat[j] in "!^":
        j += 1
    if j < len(pat) and pat[j] == "]":
        j += 1
    while j < len(pat) and pat[j] != "]":
        j += 1
    if j >= len(pat):
        return re.escape("["), i + 1
    body = pat[i + 1:j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("^", "\\^")
    return ("[^/" if negate else "[") + body + "]", j + 1


def _translate(pat: str) -> str:
    """Translate a gitignore glob (without anchoring `/` and trailing `/`) to a regex body."""
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if pat.startswith("**/", i) and (i == 0 or pat[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i) and (i == 0 or pat[i - 1] == "/") and i + 2 == n:
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            piece, i = _translate_class(pat, i)
            out.append(piece)
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pat[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def parse_line(line: str, origin: str = "") -> IgnoreRule | None:
    """Parse one `.gitignore` line into a rule, or `None` for comments and blanks."""
    line = line.rstrip("\n").rstrip("\r")
    if not line or line.startswith("#"):
        return None
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    line = stripped
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    body = line.rstrip("/")
    if not body:
        return None
    anchored = "/" in body
    body = body.lstrip("/")
    regex = _translate(body)
    if not anchored:
        regex = "(?:.*/)?" + regex
    return IgnoreRule(
        pattern=line if not negated else "!" + line,
        regex=re.compile(regex, re.DOTALL),
        negated=negated,
        dir_only=dir_only,
        origin=origin,
    )


def parse_gitignore(text: str, origin: str = "") -> list[IgnoreRule]:
    """Parse the text of one `.gitignore` file into its rules, in file order."""
    rules = []
    for number, line in enumerate(text.splitlines(), start=1):
        rule = parse_line(line, f"{origin}:{number}" if origin else str(number))
        if rule is not None:
            rules.append(rule)
    return rules


@dataclass(frozen=True)
class IgnoreSet:
    """The `.gitignore` rules in force in one folder: (folder, rules) pairs, outermost first."""

    layers: tuple[tuple[Path, tuple[IgnoreRule, ...]], ...] = ()

    def child(self, folder: Path) -> "IgnoreSet":
        """The rules in force in `folder`: these plus `folder/.gitignore` if it exists."""
        path = folder / ".gitignore"
        if not path.is_file():
            return self
        text = path.read_text(encoding="utf-8", errors="replace")
        rules = tuple(parse_gitignore(text, origin=path.as_posix()))
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
