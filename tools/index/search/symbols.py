"""The symbol table of an index: which chunk defines which function, class, method or API entry.

Built from the chunk store (no extra build step, so every existing index has one): a code chunk defines
the symbols whose `def`/`class`/`function`/... line it holds (qualified with the chunk's symbol label,
`HTTPResponse._read_chunked`); a web page chunk defines the API entry whose signature line
(a first line `` `re.search(pattern, string, flags=0)` `` naming the anchor's last part, written by
`html_markdown`; `###### re.search(...)` in indexes built before) it holds, named by its anchor.

`lookup(query)` finds the definitions a query names: the identifiers written in it (`token_urlsafe`,
`re.search`, `HTTPResponse._read_chunked`, `dictConfig`, anything in backticks, or a one-word query),
matched on the whole qualified name or on its last one or two parts, case and surrounding underscores
aside. When the query is a lookup (`is_lookup`: a few words, not a sentence that mentions a name), the
retriever puts those definitions first (code search engines' "go to definition"); a
definition whose name is spelled out in the query's words (`spelled`: "read a chunked response" ->
`_read_chunked`) is raised by a share of the top score (`definitions.definitions_first`). And
`Where(symbol_kind=...)` admits only chunks defining a symbol of that kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragsieve.tools.index.search.bm25 import tokenize
from ragsieve.tools.index.search.identifiers import identifier_terms, is_compound, split_identifier

if TYPE_CHECKING:
    from ragsieve.tools.types import Chunk

KINDS = ("function", "method", "class", "attribute")
_CODE_DEF = re.compile(
    r"^[ \t]*(?:(?:export|public|private|protected|internal|static|async|pub|abstract|final|default|override)\s+)*"
    r"(def|class|function|func|fn|interface|struct|enum|trait|type|impl)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)",
    re.MULTILINE,
)
_CLASSLIKE = {"class", "interface", "struct", "enum", "trait", "type", "impl"}
_SIGNATURE = re.compile(r"^###### (.+)$", re.MULTILINE)  # indexes built before signatures were inline code
_CODE_SIGNATURE = re.compile(r"\A`([^`\n]+)`[ \t]*(?:\n|\Z)")
# `name` or ``name`` (reStructuredText): a name-like run only, so "``obj`` to a ``str``" gives `obj`, `str`
_BACKTICKED = re.compile(r"(?<!`)(`{1,2})([A-Za-z_][\w.]{1,79}(?:\(\))?)\1(?!`)")
MAX_PER_TERM = 2


def key(name: str) -> str:
    """Lower case, surrounding underscores of each part dropped (`_read_chunked` meets `read_chunked`), except
    a dunder's (`__str__` is not `str`)."""
    return ".".join(
        part if part.startswith("__") and part.endswith("__") and len(part) > 4 else part.strip("_")
        for part in name.lower().split(".")
    )


@dataclass
class Definition:
    name: str  # qualified: `HTTPResponse._read_chunked`, `re.search`
    kind: str  # one of KINDS
    row: int


@dataclass
class SymbolTable:
    definitions: list[Definition] = field(default_factory=list)
    _by_key: dict[str, list[int]] = field(default_factory=dict)  # key -> indexes into definitions
    _spelled: dict | None = None  # stem -> (stems of a name, definition index), built on first use

    def add(self, definition: Definition) -> None:
        self.definitions.append(definition)
        parts = key(definition.name).split(".")
        for n in {len(parts), 1, 2}:
            if n <= len(parts):
                self._by_key.setdefault(".".join(parts[-n:]), []).append(len(self.definitions) - 1)

    @classmethod
    def from_chunks(cls, rows_and_chunks: Iterable[tuple[int, Chunk]]) -> SymbolTable:
        table = cls()
        for row, chunk in rows_and_chunks:
            for name, kind in definitions_in(chunk):
                table.add(Definition(name, kind, row))
        return table

    def lookup(self, query: str) -> list[Definition]:
        """Definitions the query names, full-name matches first, at most MAX_PER_TERM per name."""
        found: list[Definition] = []
        for term in named_identifiers(query):
            k = key(term)
            hits = [self.definitions[i] for i in self._by_key.get(k, [])]
            exact = [d for d in hits if key(d.name) == k]
            for d in (exact or hits)[:MAX_PER_TERM]:
                if d not in found:
                    found.append(d)
        return found

    def spelled(self, query: str, limit: int = 3) -> list[Definition]:
        """Definitions whose own name is spelled out in the query's words: every word of a name of two or
        more words (`_read_chunked`: read, chunked) is in the query, compared by stem
        ("where does http.client read a chunked response body?"). At most `limit`, the longest names first."""
        words = set(tokenize(query))
        if not words:
            return []
        if self._spelled is None:
            index: dict[str, list[tuple[frozenset, int]]] = {}
            for i, d in enumerate(self.definitions):
                parts = [p for p in split_identifier(d.name.rsplit(".", 1)[-1].strip("_")) if p]
                stems = frozenset(tokenize(" ".join(parts)))
                if len(parts) >= 2 and len(stems) == len({p.lower() for p in parts}):
                    for stem in stems:
                        index.setdefault(stem, []).append((stems, i))
            self._spelled = index
        found: dict[int, int] = {}
        for word in words:
            for stems, i in self._spelled.get(word, []):
                if stems <= words:
                    found[i] = len(stems)
        ranked = sorted(found, key=lambda i: (-found[i], i))
        return [self.definitions[i] for i in ranked[:limit]]

    def rows_of_kind(self, kind: str) -> set[int]:
        return {d.row for d in self.definitions if d.kind == kind}


LOOKUP_WORDS = 3  # a query naming a definition with at most this many other content words looks it up
# question and auxiliary words (as `bm25.tokenize` stems them), which say nothing about the subject
_QUESTION_WORDS = frozenset(
    "how what where which why when who whi doe do did is are was can could should would i we you use".split()
)


def is_lookup(query: str) -> bool:
    """A query about the names in it: besides them, at most LOOKUP_WORDS words that are not stopwords
    (`re.search`, "What does functools.lru_cache do?", "how does wait_for cancel the task on timeout").
    A description that mentions a name is about something else ("Return a ZipInfo object with information
    about the archive member name" describes `ZipFile.getinfo`, not `ZipInfo`), so its names are left to
    BM25's whole-identifier terms instead of being put first (API anchor precision on 80 description
    questions: benchmarks/results/sources-web.json)."""
    rest = query
    for name in sorted(named_identifiers(query), key=len, reverse=True):
        rest = rest.replace(name, " ")
    return len([w for w in tokenize(rest) if w not in _QUESTION_WORDS]) <= LOOKUP_WORDS


def named_identifiers(query: str) -> list[str]:
    """The identifiers a query names: compound or dotted ones, backticked ones, or the word of a one-word query."""
    names = [m.group(2).rstrip("()") for m in _BACKTICKED.finditer(query)]
    names += [t for t, whole in identifier_terms(query) if whole and (is_compound(t) or "." in t)]
    words = query.strip().strip("?.!`").split()
    if len(words) == 1 and re.fullmatch(r"[A-Za-z_][\w.]{2,}", words[0].rstrip("()")):
        names.append(words[0].rstrip("()"))
    return list(dict.fromkeys(n for n in names if n and len(n) <= 200))


def definitions_in(chunk: Chunk) -> list[tuple[str, str]]:
    """(qualified name, kind) of the definitions that start in a chunk (see the module docstring)."""
    if chunk.kind == "code":
        return _code_definitions(chunk.text, chunk.symbol)
    if chunk.symbol.startswith("#"):
        return _page_definitions(chunk.text, chunk.symbol[1:])
    return []


def _code_definitions(text: str, label: str) -> list[tuple[str, str]]:
    qualified = [s.strip() for s in label.split(",") if s.strip() and s.strip() != "..."]
    out = []
    for match in _CODE_DEF.finditer(text):
        word, name = match.group(1), match.group(2)
        full = next((q for q in qualified if q == name or q.endswith("." + name)), name)
        if word in _CLASSLIKE:
            kind = "class"
        else:
            kind = "method" if match.group(0)[:1] in " \t" and "." in full else "function"
        out.append((full, kind))
    return out


def _page_definitions(text: str, anchor: str) -> list[tuple[str, str]]:
    out = []
    first_line = _CODE_SIGNATURE.match(text)
    names_anchor = first_line is not None and anchor.rsplit(".", 1)[-1] in first_line.group(1)
    for match in [first_line] if first_line is not None and names_anchor else _SIGNATURE.finditer(text):
        signature = match.group(1).strip().lstrip("@")
        first = signature.split(" ", 1)[0]
        if first in ("class", "exception"):
            kind = "class"
        elif "(" in signature:
            parts = anchor.split(".")
            kind = "method" if len(parts) >= 2 and parts[-2][:1].isupper() else "function"
        else:
            kind = "attribute"
        out.append((anchor, kind))
        break  # one chunk, one entry: the anchor names the first signature of the chunk
    return out
