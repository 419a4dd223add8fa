"""BM25 keyword index over the chunk rows, with two selectable engines.

Both engines score with Lucene's BM25 (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", FnTIR 2009; Lucene
variant as in Kamphuis et al., ECIR 2020) over the tokens of one shared
tokenizer, so they return the same scores:

* `bm25s` (default): sparse precomputed scores, ~1 ms per query.
* `rank_bm25`: `BM25Okapi` with its idf replaced by Lucene's (see
  `_LuceneOkapi`); pure Python, ~100 ms per query on 5k chunks.

Tokenizer: lower-cased `\\w+` tokens, English stopwords (bm25s' list)
removed, then English Snowball stemming (PyStemmer) unless `stem=False`.
With `identifiers=True` (new indexes; `ragsieve.tools.index.search.identifiers`) code
identifiers are also kept whole, unstemmed (`token_urlsafe`, `re.search`,
`httpresponse`) beside their stemmed words; an index built before records no
`identifiers` and keeps the plain tokenizer.
Stemming is on by default because it scored best on SciFact (bm25s, k1=0.9,
b=0.4, title+text, chunk_tokens=512): nDCG@10 0.682 test / 0.692 train with
stems vs 0.666 / 0.665 without (measured with benchmarks/retrieval.py's
metric functions; 2026-11-21, a one-off decision run with no result file kept). The current
default index's BM25-alone figure is 0.683 (200-token chunks, `benchmarks/results/retrieval_scifact.json`).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ragsieve.tools.errors import IndexMissingError, UsageError
from ragsieve.tools.index.search.admitted import Admitted
from ragsieve.tools.index.search.compounds import compound_words
from ragsieve.tools.index.search.identifiers import identifier_terms, is_compound
from ragsieve.tools.modes import BM25Engine, parse_enum

_WORD = re.compile(r"\w+")
_TERM = re.compile(r"\w+(?:\.(?=[A-Za-z_])\w+)*")
_META = "bm25.json"
_TOKENS = "tokens.json"


@functools.lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@functools.lru_cache(maxsize=4)
def _stemmer(language: str) -> Any:
    try:
        import Stemmer
    except ImportError as exc:
        raise UsageError("BM25 stemming needs PyStemmer: pip install PyStemmer") from exc
    return Stemmer.Stemmer(language)


def tokenize(text: str, stem: bool = True, identifiers: bool = False, compounds: bool = False) -> list[str]:
    """The one tokenizer of both engines: lowercase `\\w+`, no English stopwords, Snowball stems;
    with `identifiers`, compound and dotted identifiers are kept whole (unstemmed) as well; with
    `compounds` (documents only, never queries: `ragsieve.tools.index.search.compounds`), the words of lower-case
    compounds (`getheader` -> `get`, `header`) are added, stemmed."""
    tokens = _tokenize(text, stem, identifiers)
    if compounds:
        stop = _stopwords()
        extra = [w for w in compound_words(text) if w not in stop]
        tokens += _stemmer("english").stemWords(extra) if stem and extra else extra
    return tokens


def _tokenize(text: str, stem: bool, identifiers: bool) -> list[str]:
    stop = _stopwords()
    if not identifiers:
        words = [w for w in _WORD.findall(text.lower()) if w not in stop]
        return _stemmer("english").stemWords(words) if stem else words
    special, plain = [], []  # dotted and compound identifiers go through `identifier_terms`; BM25 is a bag of words
    for term in _TERM.findall(text):
        if "_" in term or "." in term or not (term.islower() or term.isdigit()) and is_compound(term):
            special.append(term)
        else:
            plain.append(term.lower())
    terms = [(t.lower(), whole) for t, whole in identifier_terms(" ".join(special))] if special else []
    words = [t for t, whole in terms if not whole and t not in stop] + [w for w in plain if w not in stop]
    stems = _stemmer("english").stemWords(words) if stem else words
    return [t for t, whole in terms if whole] + stems


def tokenizer_description(stem: bool, identifiers: bool = False, compounds: bool = False) -> str:
    return (
        "lowercase \\w+, bm25s English stopwords removed"
        + (", Snowball English stems (PyStemmer)" if stem else "")
        + ("; identifiers kept whole and split" if identifiers else "")
        + ("; documents: lower-case compounds split into words" if compounds else "")
    )


def lucene_idf(df: int, n_docs: int) -> float:
    """Lucene's BM25 idf: ln(1 + (N - df + 0.5) / (df + 0.5)), never negative."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def lucene_bm25_scores(corpus_tokens: list[list[str]], query_tokens: list[str], k1: float = 0.9, b: float = 0.4) -> list[float]:
    """Reference Lucene BM25 score of every document for one query (brute force).

    score(d, q) = sum over query tokens t (repeats count again) of
      idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
    idf as in `lucene_idf` (Robertson & Zaragoza 2009 eq. 3.15 without the
    constant (k1 + 1) factor, which Lucene drops since it does not change ranks).
    """
    n = len(corpus_tokens)
    avgdl = sum(len(d) for d in corpus_tokens) / n
    df = Counter(t for d in corpus_tokens for t in set(d))
    out = []
    for doc in corpus_tokens:
        tf = Counter(doc)
        norm = k1 * (1 - b + b * len(doc) / avgdl)
        out.append(sum(lucene_idf(df[t], n) * tf[t] / (tf[t] + norm) for t in query_tokens if tf[t]))
    return out


def _lucene_okapi_class() -> type:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as exc:
        raise UsageError("bm25 engine rank_bm25 needs rank-bm25: pip install rank-bm25") from exc

    class _LuceneOkapi(BM25Okapi):
        """BM25Okapi scoring exactly like Lucene.

        rank_bm25's idf is ln((N - df + 0.5)/(df + 0.5)) with negative values
        floored at epsilon * mean idf, and its tf part carries a (k1 + 1)
        factor. Storing idf_lucene / (k1 + 1) instead makes its `get_scores`
        equal to `lucene_bm25_scores`.
        """

        def _calc_idf(self, nd: dict[str, int]) -> None:
            for word, freq in nd.items():
                self.idf[word] = lucene_idf(freq, self.corpus_size) / (self.k1 + 1)
            self.average_idf = sum(self.idf.values()) / max(len(self.idf), 1)

    return _LuceneOkapi


class BM25Index:
    """Keyword index whose document i is chunk row i."""

    def __init__(
        self,
        engine: str | BM25Engine = BM25Engine.BM25S,
        k1: float = 0.9,
        b: float = 0.4,
        stem: bool = True,
        identifiers: bool = True,
        compounds: bool = True,
    ) -> None:
        self.engine = parse_enum(BM25Engine, engine, "bm25 engine")
        if not k1 > 0:
            raise UsageError(f"bm25 k1 must be > 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise UsageError(f"bm25 b must be in [0, 1], got {b}")
        self.k1, self.b, self.stem = float(k1), float(b), bool(stem)
        self.identifiers = bool(identifiers)
        self.compounds = bool(compounds)  # documents' lower-case compounds split (`tokenize`); old indexes: False
        self._model: Any = None  # a bm25s.BM25 or a rank_bm25 BM25Okapi
        self._tokens: list[list[str]] | None = None
        self.n_docs = 0

    @property
    def params(self) -> dict:
        return {
            "engine": self.engine.value,
            "k1": self.k1,
            "b": self.b,
            "method": "lucene",
            "stem": self.stem,
            "identifiers": self.identifiers,
            "compounds": self.compounds,
            "tokenizer": tokenizer_description(self.stem, self.identifiers, self.compounds),
        }

    def build(self, texts: list[str], kinds: list[str] | None = None) -> "BM25Index":
        """Index `texts` (row i = texts[i]); with `kinds` (the chunks' kinds), compound words are added to code
        chunks only: on prose (SciFact, BM25 alone) they cost nDCG@10 0.002 test / 0.001 train
        (benchmarks/results/bm25-identifiers.json)."""
        code = [True] * len(texts) if kinds is None else [k == "code" for k in kinds]
        tokens = [tokenize(t, self.stem, self.identifiers, self.compounds and c) for t, c in zip(texts, code)]
        if not tokens or not any(tokens):
            raise UsageError("BM25 index: the texts hold no indexable terms")
        self._fit(tokens)
        return self

    def _fit(self, tokens: list[list[str]]) -> None:
        self.n_docs = len(tokens)
        if self.engine is BM25Engine.BM25S:
            import bm25s

            model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene", dtype="float64")
            model.index(tokens, show_progress=False)
            self._model = model
        else:
            self._model = _lucene_okapi_class()(tokens, k1=self.k1, b=self.b)
            self._tokens = tokens

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self._model is None:
            raise UsageError("BM25 index: nothing to save, call build() first")
        if self.engine is BM25Engine.BM25S:
            self._model.save(str(d), show_progress=False)
        else:
            (d / _TOKENS).write_text(json.dumps(self._tokens), encoding="utf-8")
        (d / _META).write_text(json.dumps({**self.params, "n_docs": self.n_docs}), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> "BM25Index":
        d = Path(directory)
        if not (d / _META).is_file():
            raise IndexMissingError(f"BM25 index not found in {d} (no {_META})")
        meta = json.loads((d / _META).read_text(encoding="utf-8"))
        index = cls(
            meta["engine"], meta["k1"], meta["b"], meta["stem"], meta.get("identifiers", False), meta.get("compounds", False)
        )
        if index.engine is BM25Engine.BM25S:
            import bm25s

            index._model = bm25s.BM25.load(str(d), show_progress=False)
            index.n_docs = int(index._model.scores["num_docs"])
        else:
            index._fit(json.loads((d / _TOKENS).read_text(encoding="utf-8")))
        return index

    def scores(self, query: str) -> np.ndarray:
        """Lucene BM25 score of every row for `query` (float64, length n_docs)."""
        if self._model is None:
            raise UsageError("BM25 index is empty: build() or load() it first")
        q = tokenize(query, self.stem, self.identifiers)
        if self.engine is BM25Engine.BM25S:
            ids = self._model.get_tokens_ids(q)
            if not ids:
                return np.zeros(self.n_docs, dtype=np.float64)
            return np.asarray(self._model.get_scores_from_ids(ids), dtype=np.float64)
        if not q:
            return np.zeros(self.n_docs, dtype=np.float64)
        return np.asarray(self._model.get_scores(q), dtype=np.float64)

    def score_rows(self, query: str, rows: Any) -> np.ndarray:
        """BM25 scores of `rows` only (the backend-neutral way to score hits)."""
        scores = self._last_scores(query)
        return scores[np.asarray(list(rows), dtype=np.int64)] if len(rows) else np.zeros(0)

    def _last_scores(self, query: str) -> np.ndarray:
        cached = getattr(self, "_last", None)
        if cached is not None and cached[0] == query:
            return cached[1]
        scores = self.scores(query)
        self._last = (query, scores)  # search + score_rows of one query compute the scores once
        return scores

    def search(self, query: str, k: int = 10, rows: list[int] | None = None) -> list[tuple[int, float]]:
        """Top `k` (row, score) with a positive score, best first; `rows` restricts the candidates."""
        if k < 1:
            raise UsageError(f"BM25 search k must be >= 1, got {k}")
        return top_positive(self._last_scores(query), k, rows)

    def search_admitted(self, query: str, k: int, admitted: Admitted) -> list[tuple[int, float]]:
        """`search` restricted to an `Admitted` set: a broad set masks the positive scores (no gather), a
        narrow one gathers its rows' scores; the same ranking as `search(query, k, admitted.tolist())`."""
        if k < 1:
            raise UsageError(f"BM25 search k must be >= 1, got {k}")
        scores = self._last_scores(query)
        if 8 * len(admitted) < len(scores):
            return top_positive(scores, k, admitted.rows)
        pos = np.flatnonzero(scores > 0)
        pos = pos[admitted.mask[pos]]
        return _best(pos, scores[pos], k)


def top_positive(scores: np.ndarray, k: int, rows: list[int] | np.ndarray | None = None) -> list[tuple[int, float]]:
    """Best-first (row, score) of the k highest positive scores; ties by lower row."""
    if rows is not None:
        cand = np.asarray(rows, dtype=np.int64)
        vals = scores[cand]
    else:
        cand = None
        vals = scores
    pos = np.flatnonzero(vals > 0)
    return _best(cand[pos] if cand is not None else pos, vals[pos], k)


def _best(ids: np.ndarray, vals: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k highest (id, value) pairs, best first, ties by lower id (ids ascending on entry)."""
    if ids.size > k:  # every value at or above the k-th is kept, so ties at the cut go to the lower id
        kth = np.partition(vals, ids.size - k)[ids.size - k]
        keep = np.flatnonzero(vals >= kth)
        ids, vals = ids[keep], vals[keep]
    order = np.lexsort((ids, -vals))[:k]
    return list(zip(ids[order].tolist(), vals[order].tolist()))
