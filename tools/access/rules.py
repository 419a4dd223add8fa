"""An access rules file for `ragsieve index --access-rules FILE`: which documents each principal may read.

One rule a line, `PATTERN PRINCIPAL[, PRINCIPAL...]`; `#` starts a comment line::

    # gitignore-style globs over the document's path below the source root
    docs/**                      public
    docs/finance/**              group:finance, user:cfo@example.com
    # URL prefixes for crawled pages
    https://intranet.example.com/hr/   group:hr

PATTERN is a `.gitignore` pattern (pathspec's `GitIgnoreSpecPattern`: `*`, `**`, `[...]`, anchoring by a
leading or inner `/`, a trailing `/` for a folder's contents) or, when it starts with `http://` or
`https://`, a URL prefix. As in `.gitignore`, the last rule that matches a document decides; its
principals replace (never add to) those of earlier rules. A bad line is refused with its line number.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from ragsieve.tools.access.principals import principals
from ragsieve.tools.errors import UsageError

MAX_RULES_BYTES = 1_000_000


@dataclass(frozen=True)
class Rule:
    line: int
    pattern: str
    readers: tuple[str, ...]

    def matches(self, source: str) -> bool:
        if self.pattern.startswith(("http://", "https://")):
            return source.startswith(self.pattern)
        if source.startswith(("http://", "https://")):
            return False
        return _compiled(self.pattern).match_file(source) is not None


_CACHE: dict[str, GitIgnoreSpecPattern] = {}


def _compiled(pattern: str) -> GitIgnoreSpecPattern:
    spec = _CACHE.get(pattern)
    if spec is None:
        spec = _CACHE[pattern] = GitIgnoreSpecPattern(pattern)
        while len(_CACHE) > 4096:
            _CACHE.pop(next(iter(_CACHE)))
    return spec


@dataclass(frozen=True)
class AccessRules:
    rules: tuple[Rule, ...]
    text: str

    @classmethod
    def parse(cls, text: str, name: str = "access rules") -> "AccessRules":
        rules = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            pattern, _, rest = line.partition(" ") if " " in line else line.partition("\t")
            if not rest.strip():
                raise UsageError(f"{name} line {number}: expected PATTERN PRINCIPAL[, PRINCIPAL...], got {line[:80]!r}")
            if pattern.startswith("!"):
                raise UsageError(
                    f"{name} line {number}: negated patterns are not access rules; give the "
                    "principals the matching documents get instead"
                )
            try:
                readers = principals(rest)
                if not pattern.startswith(("http://", "https://")):
                    _compiled(pattern)
            except (UsageError, ValueError) as exc:
                raise UsageError(f"{name} line {number}: {exc}") from None
            rules.append(Rule(number, pattern, readers))
        return cls(tuple(rules), text)

    @classmethod
    def read(cls, path: str | Path) -> "AccessRules":
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read access rules {p}: {exc.strerror or exc}") from None
        if len(data) > MAX_RULES_BYTES:
            raise UsageError(f"access rules {p} is over {MAX_RULES_BYTES} bytes")
        try:
            return cls.parse(data.decode("utf-8"), str(p))
        except UnicodeDecodeError:
            raise UsageError(f"access rules {p} is not UTF-8 text") from None

    def decide(self, source: str) -> Rule | None:
        """The last rule matching `source` (None: no rule does)."""
        for rule in reversed(self.rules):
            if rule.matches(source):
                return rule
        return None

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]
