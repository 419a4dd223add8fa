"""Code identifiers as search terms: kept whole and split into their words.

`token_urlsafe` is indexed as `token_urlsafe`, `token` and `urlsafe`; `HTTPResponse` as `httpresponse`,
`http` and `response`; `re.search` as `re.search`, `re` and `search`. A query that names an identifier
exactly then matches it as one rare term (high idf), and a query in words (`read a chunked response`)
still matches its parts. Leading and trailing underscores are dropped from the whole form
(`_read_chunked` -> `read_chunked`), so `HTTPResponse._read_chunked` and `read_chunked` meet.
This is the identifier splitting of code search engines (e.g. Sourcegraph's and GitHub's code search
tokenisers; Lawrie & Binkley 2011, "Expanding identifiers to normalize source code vocabulary") applied
to prose and code alike.
"""

from __future__ import annotations

import re

# a dotted name (`os.path.join`, `re.search`) or a single \w+ run
_TERM = re.compile(r"\w+(?:\.(?=[A-Za-z_])\w+)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+|[^\W\d_A-Za-z]+")


def split_identifier(word: str) -> list[str]:
    """The words of one identifier (`HTTPResponse` -> `HTTP`, `Response`; `token_urlsafe` -> `token`, `urlsafe`)."""
    parts: list[str] = []
    for piece in word.split("_"):
        if piece:
            parts.extend(_CAMEL.findall(piece) or [piece])
    return parts


def is_compound(word: str) -> bool:
    """An identifier with more than one word in it (underscores inside, or a case change after a lower letter)."""
    core = word.strip("_")
    return "_" in core or bool(re.search(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]", core))


def identifier_terms(text: str) -> list[tuple[str, bool]]:
    """(term, is_whole_identifier) in text order, not lower-cased: for every dotted name its whole form,
    then each \\w+ run; a compound run (see `is_compound`) is followed by its words. Plain words come out
    once, as `(word, False)`."""
    out: list[tuple[str, bool]] = []
    for match in _TERM.finditer(text):
        term = match.group(0)
        if "." in term:
            out.append((".".join(run.strip("_") for run in term.split(".")), True))
        for run in term.split("."):
            core = run.strip("_")
            if not core:
                continue
            if is_compound(run):
                out.append((core, True))
                out.extend((w, False) for w in split_identifier(core))
            else:
                out.append((core, False))
    return out
