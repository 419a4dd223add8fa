"""An index's access labels: who may read each document, kept beside the chunks in `<index>/access.json`.

Three layers decide a document's access list, the first that speaks winning:

1. `attributes`: documents-API files (`access` attribute), by source prefix (`<file-id>/`);
2. `rules`: the access rules file given to `ragsieve index --access-rules` (`ragsieve.tools.access.rules`);
3. `front_matter`: a markdown document's own `access:` list, recorded when it was indexed;

and a document none of them labels gets `default` (`public` or `deny`). The file holds the layers, not a
table of documents, so changing only the rules re-labels every document without re-embedding: the next
search reads the new file (`load` re-reads it when it changes). Every write is atomic (a temporary file
renamed over it) under a lock, so readers never see half a file and writers never lose each other's layer.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ragsieve.tools.access.principals import AccessDefault, may_read, principals
from ragsieve.tools.access.rules import AccessRules
from ragsieve.tools.errors import UsageError

FILE = "access.json"
_LOCK = threading.Lock()
_LOADED: dict[str, tuple[tuple[int, int], "AccessLabels"]] = {}


@dataclass(frozen=True)
class Decision:
    readers: tuple[str, ...]
    origin: str  # "file attributes", "rules line 3 (docs/finance/**)", "front matter", "default"


@dataclass
class AccessLabels:
    default: AccessDefault = AccessDefault.PUBLIC
    rules: AccessRules | None = None
    rules_file: str | None = None
    front_matter: dict[str, tuple[str, ...]] = field(default_factory=dict)
    attributes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    version: str = "none"
    _memo: dict[str, Decision] = field(default_factory=dict, repr=False)

    @property
    def labelled(self) -> bool:
        return bool(self.rules and self.rules.rules) or bool(self.front_matter) or bool(self.attributes)

    def decide(self, source: str) -> Decision:
        """The access list of the document cited as `source`, and which layer gave it."""
        got = self._memo.get(source)
        if got is not None:
            return got
        got = self._decide(source)
        if len(self._memo) < 1_000_000:
            self._memo[source] = got
        return got

    def _decide(self, source: str) -> Decision:
        best = max((p for p in self.attributes if source.startswith(p)), key=len, default=None)
        if best is not None:
            return Decision(self.attributes[best], "file attributes")
        rule = self.rules.decide(source) if self.rules is not None else None
        if rule is not None:
            return Decision(rule.readers, f"rules line {rule.line} ({rule.pattern})")
        if source in self.front_matter:
            return Decision(self.front_matter[source], "front matter")
        readers = ("public",) if self.default is AccessDefault.PUBLIC else ()
        return Decision(readers, f"default ({self.default.value})")

    def grant(self, caller: Iterable[str]) -> Callable[[str], bool]:
        """A test of sources: whether a caller holding the principals `caller` may read each."""
        held = frozenset(caller)
        return lambda source: may_read(self.decide(source).readers, held)

    def to_json(self) -> dict:
        return {
            "version": 1,
            "default": self.default.value,
            "rules": None if self.rules is None else {"file": self.rules_file, "text": self.rules.text},
            "front_matter": {k: list(v) for k, v in sorted(self.front_matter.items())},
            "attributes": {k: list(v) for k, v in sorted(self.attributes.items())},
        }

    @classmethod
    def from_json(cls, data: dict, version: str = "none") -> "AccessLabels":
        rules = data.get("rules")
        return cls(
            default=AccessDefault(data.get("default", "public")),
            rules=AccessRules.parse(rules["text"], rules.get("file") or "access rules") if rules else None,
            rules_file=rules.get("file") if rules else None,
            front_matter={k: principals(v) for k, v in (data.get("front_matter") or {}).items()},
            attributes={k: principals(v) for k, v in (data.get("attributes") or {}).items()},
            version=version,
        )


def load(root: str | Path) -> AccessLabels:
    """The labels of the index at `root` (no file: every document public); re-read when the file changes."""
    path = Path(root) / FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        return AccessLabels()
    stamp = (st.st_mtime_ns, st.st_size)
    with _LOCK:
        cached = _LOADED.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        labels = AccessLabels.from_json(data, version=f"{stamp[0]}-{stamp[1]}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # never fall back to "everything public" on a damaged file: refuse the search instead
        raise UsageError(f"cannot read the access labels {path}: {exc}") from None
    with _LOCK:
        _LOADED[str(path)] = (stamp, labels)
    return labels


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{FILE}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def update(root: str | Path, change: Callable[[AccessLabels], None]) -> AccessLabels:
    """Read the labels, apply `change` to them, write them back atomically (one writer at a time)."""
    root = Path(root)
    with _locked(root):
        labels = load(root)
        labels = AccessLabels.from_json(labels.to_json())  # a private copy: the cached one stays as it was
        change(labels)
        path = root / FILE
        tmp = path.with_name(f".{FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(labels.to_json(), ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    return load(root)


def set_rules(
    root: str | Path, rules: AccessRules | None, rules_file: str | None = None, default: AccessDefault | None = None
) -> AccessLabels:
    def change(labels: AccessLabels) -> None:
        labels.rules, labels.rules_file = rules, rules_file
        if default is not None:
            labels.default = default

    return update(root, change)


def set_front_matter(root: str | Path, found: dict[str, tuple[str, ...]], read: Iterable[str]) -> AccessLabels:
    """Record the front-matter lists of the documents just read (`read`: their sources; one without an
    `access:` list loses an earlier one)."""
    read = list(read)
    current = load(root)
    if not found and not any(s in current.front_matter for s in read):
        return current  # nothing to record (an index without front-matter access gets no file)

    def change(labels: AccessLabels) -> None:
        for source in read:
            labels.front_matter.pop(source, None)
        labels.front_matter.update(found)

    return update(root, change)


def set_attribute(root: str | Path, prefix: str, readers: tuple[str, ...] | None) -> AccessLabels:
    """A documents-API file's access list (None: the file has none, the other layers decide)."""

    def change(labels: AccessLabels) -> None:
        if readers is None:
            labels.attributes.pop(prefix, None)
        else:
            labels.attributes[prefix] = readers

    return update(root, change)
