"""Why a caller can or cannot read a document, and how an index's documents are labelled (build summary).
The caller opens the index (`ragsieve.tools.index.engines.open`); this module asks it, whatever its engine."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ragsieve.tools.access.labels import AccessLabels, load
from ragsieve.tools.access.principals import PUBLIC, principals
from ragsieve.tools.errors import UsageError


@dataclass(frozen=True)
class Explanation:
    source: str
    caller: tuple[str, ...]
    readers: tuple[str, ...]
    origin: str
    allowed: bool

    def text(self) -> str:
        who = ", ".join(self.caller) or "(no principals)"
        listed = ", ".join(self.readers) or "nobody"
        if not self.allowed:
            return f"{who} may NOT read {self.source}: its access list is [{listed}] (from {self.origin})"
        via = PUBLIC if PUBLIC in self.readers else ", ".join(sorted(set(self.readers) & set(self.caller)))
        return f"{who} may read {self.source}: its access list is [{listed}] (from {self.origin}), granted to {via}"


class Listed(Protocol):
    """What explaining reads from an index (any backend, `ragsieve.tools.index.backend.IndexBackend`)."""

    @property
    def root(self) -> Path: ...
    def sources(self) -> list[str]: ...


def index_sources(index: Listed) -> list[str]:
    """The document sources of an index's live generation (the backend lists them)."""
    return sorted(index.sources())


def explain(index: Listed, caller: list[str] | str, document: str) -> Explanation:
    """Whether `caller` (principals) may read `document` (a source as cited, or a file id of the documents
    API: the document whose source starts with `<id>/`); UsageError when the index has no such document."""
    held = principals(caller)
    sources = index_sources(index)
    found = document if document in sources else next((s for s in sources if s.startswith(document.rstrip("/") + "/")), None)
    if found is None:
        raise UsageError(f"no document {document!r} in the index {index.root}")
    decision = load(index.root).decide(found)
    allowed = PUBLIC in decision.readers or bool(set(decision.readers) & set(held))
    return Explanation(found, held, decision.readers, decision.origin, allowed)


def summary(labels: AccessLabels, sources: list[str]) -> str:
    """`access: 3 documents by rules, 1 by front matter; 5 unlabelled -> public` for a build summary."""
    counts = Counter(labels.decide(s).origin.split(" line ")[0].split(" (")[0] for s in sources)
    unlabelled = counts.pop("default", 0)
    named = "; ".join(f"{n} by {origin}" for origin, n in sorted(counts.items())) or "none labelled"
    return f"access: {named}; {unlabelled} unlabelled -> {labels.default.value}" + (
        "" if labels.default.value == PUBLIC else " (readable only without an identity: the CLI, an unrestricted key)"
    )
