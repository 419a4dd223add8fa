"""Hybrid retrieval: BM25 and dense candidates fused into one ranked list of Hits.

Query expansion (`extra_texts`, e.g. chunks an LLM judged relevant):
* BM25 query = the question followed by the extra texts (one bag of words;
  repeated terms count again, as in Lucene);
* dense query = normalise((q + mean(e_1..e_n)) / 2): the question keeps half
  of the weight however many texts are added (Rocchio's relevance feedback,
  1971, with alpha = beta). An extra text that is a stored chunk text reuses
  that chunk's stored vector; other texts are embedded.

Metadata filters (`where`, `ragsieve.tools.index.search.where.Where`) restrict every search to the rows the
backend says the filter admits (intersected with `rows`). `fusion_site` (`ragsieve.tools.modes.FusionSite`)
chooses who fuses: `client` (the functions of `fusion.py`), `server` (the backend's `hybrid_search`: one
round trip to Milvus; unrestricted searches only, a row-restricted search is fused here), `auto` (server
when it is the same fusion: RRF with equal weights). Server-fused hits carry no per-list ranks.

Definitions first (`symbols=True`): a definition the query names or spells out leads or is raised
(`ragsieve.tools.index.query.definitions`).

One hit per definition (`collapse=True`): a later piece of a split code definition whose better-ranked piece
is already in the list is dropped and the list read further (`ragsieve.tools.filters.stitch.one_per_definition`),
so the top k are k different passages once stitching reads each definition whole. One hit per section
(`sections=True`): a later chunk of a page section (the same `URL#anchor`) is dropped the same way
(`ragsieve.tools.filters.sections.one_per_section`). A table-of-contents page's chunks (`kind == "toc"`)
are never returned, unless the filter asks for `kind="toc"`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragsieve.tools import tracing
from ragsieve.tools.errors import UsageError
from ragsieve.tools.filters.sections import TOC_KIND, one_per_section
from ragsieve.tools.filters.stitch import ParsedFiles, one_per_definition
from ragsieve.tools.index.backend import AdmittedSearch, IndexBackend, ServerFusion, vectors_of
from ragsieve.tools.index.query.definitions import definitions_first, named_rows
from ragsieve.tools.index.query.fusion import Ranked, check_weights, fuse
from ragsieve.tools.index.query.source_first import DEPTH, MIN_DEPTH, source_first
from ragsieve.tools.index.search.admitted import Admitted
from ragsieve.tools.index.search.dense import l2_normalise
from ragsieve.tools.modes import FusionMode, FusionSite, RankingMode, parse_enum
from ragsieve.tools.tracing.conventions import retrieval_after, retrieval_before
from ragsieve.tools.types import Hit


class HybridRetriever:
    """BM25 top `candidate_k` + dense top `candidate_k`, fused by RRF or weighted min-max sum."""

    def __init__(
        self,
        index: IndexBackend,
        fusion: str | FusionMode = FusionMode.RRF,
        rrf_k: int = 60,
        bm25_weight: float = 1.0,
        dense_weight: float = 1.0,
        candidate_k: int = 100,
        fusion_site: str | FusionSite = FusionSite.AUTO,
        where: Any = None,
        symbols: bool = True,
        collapse: bool = True,
        sections: bool = True,
        ranking: str | RankingMode = RankingMode.HYBRID,
    ) -> None:
        self.index = index
        self.fusion = parse_enum(FusionMode, fusion, "fusion mode")
        self.fusion_site = parse_enum(FusionSite, fusion_site, "fusion site")
        if self.fusion_site is FusionSite.SERVER and not isinstance(index, ServerFusion):
            raise UsageError(
                'retrieval.fusion_site = "server" needs a backend that fuses (milvus); '
                'this index is local: use "client" or "auto"'
            )
        self.where = None if where is None or where.empty() else where
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 1:
            raise UsageError(f"rrf_k must be an integer >= 1, got {rrf_k!r}")
        if isinstance(candidate_k, bool) or not isinstance(candidate_k, int) or candidate_k < 1:
            raise UsageError(f"candidate_k must be an integer >= 1, got {candidate_k!r}")
        self.rrf_k, self.candidate_k = rrf_k, candidate_k
        self.symbols = bool(symbols)
        self.collapse = bool(collapse)
        self.sections = bool(sections)
        self.ranking = parse_enum(RankingMode, ranking, "ranking")
        self._parsed = ParsedFiles()  # documents parsed by `collapse`, shared with the clones of `with_filter`
        self.weights = check_weights(bm25_weight, dense_weight)
        if self.fusion_site is FusionSite.SERVER and self.fusion is FusionMode.RRF and self.weights[0] != self.weights[1]:
            raise UsageError(
                'retrieval.fusion_site = "server": Milvus\' RRF ranker has no per-list weights; '
                'use equal bm25/dense weights, weighted fusion, or fusion_site "client"'
            )

    def with_filter(self, where: Any) -> "HybridRetriever":
        """The same retriever restricted by a metadata filter (None: unrestricted)."""
        clone = HybridRetriever.__new__(HybridRetriever)
        clone.__dict__.update(self.__dict__)
        clone.where = None if where is None or where.empty() else where
        return clone

    def admit(self, rows: Sequence[int]) -> list[int]:
        """`rows` narrowed to those the retriever's metadata filter admits (all of them without a filter)."""
        if self.where is None:
            return list(rows)
        if isinstance(self.index, AdmittedSearch):
            admitted = self.index.admitted(self.where)
            return [r for r in rows if r in admitted]
        allowed = set(self.index.filter_rows(self.where))
        return [r for r in rows if r in allowed]

    def _server_fuses(self, rows: Any, w_bm25: float, w_dense: float) -> bool:
        if rows is not None or not isinstance(self.index, ServerFusion) or not (w_bm25 > 0 and w_dense > 0):
            return False
        if self.fusion_site is FusionSite.SERVER:
            return True
        return self.fusion_site is FusionSite.AUTO and self.fusion is FusionMode.RRF and w_bm25 == w_dense

    def query_vector(self, query: str, extra_texts: Sequence[str] = ()) -> np.ndarray:
        """The dense query: the question's vector, blended with the extra texts' (see module doc)."""
        q = self.index.embed_query(query)
        if not extra_texts:
            return q
        stored = [self.index.store.row_of_text(t) for t in extra_texts]
        missing = [t for t, r in zip(extra_texts, stored) if r is None]
        parts = [np.asarray(vectors_of(self.index)[r], dtype=np.float32) for r in stored if r is not None]
        if missing:
            parts.extend(self.index.embed(missing))
        return l2_normalise((q + np.mean(parts, axis=0)) / 2.0)

    @tracing.traced("ragsieve.retrieve", tracing.Kind.RETRIEVER, retrieval_before, retrieval_after)  # docs/tracing.md
    def run(
        self,
        query: str,
        top_k: int = 10,
        *,
        rows: list[int] | None = None,
        extra_texts: list[str] | None = None,
        weights: tuple[float, float] | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit]:
        """The `top_k` fused hits for `query`, best first.

        `rows` restricts both retrievers to those index rows; `extra_texts`
        expands the query; `weights` = (bm25, dense) overrides the constructor
        weights for this call; `query_vector` supplies a precomputed dense
        query vector (then `extra_texts` only expand the BM25 side).
        """
        if not isinstance(query, str) or not query.strip():
            raise UsageError("the query must be a non-empty string")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise UsageError(f"top_k must be an integer >= 1, got {top_k!r}")
        w_bm25, w_dense = check_weights(*weights) if weights is not None else self.weights
        n = len(self.index)
        checked = False
        admitted: Admitted | None = None
        if self.where is not None and rows is None and isinstance(self.index, AdmittedSearch):
            admitted = self.index.admitted(self.where)  # resolved once per filter and labels version
            if not len(admitted):
                return []
        elif self.where is not None:
            allowed = self.index.filter_rows(self.where)  # sorted rows of the index: no second check
            rows, checked = (allowed, True) if rows is None else (sorted(set(int(r) for r in rows) & set(allowed)), False)
        if rows is not None and not checked:
            rows = sorted({int(r) for r in rows})
            bad = [r for r in rows if not 0 <= r < n]
            if bad:
                raise UsageError(f"rows {bad[:5]} outside the index (0..{n - 1})")
        if rows is not None and not rows:
            return []
        extra = [t for t in (extra_texts or []) if t and t.strip()]
        bm25_query = " ".join([query, *extra])
        qvec = query_vector if query_vector is not None else self.query_vector(query, extra)
        qvec = np.asarray(qvec, dtype=np.float32).reshape(-1)

        if admitted is None and self._server_fuses(rows, w_bm25, w_dense):
            if self.ranking is RankingMode.SOURCE_FIRST:
                window = max(top_k * DEPTH, MIN_DEPTH)
                return source_first(self._server_hits(bm25_query, qvec, window, (w_bm25, w_dense)), top_k)
            return self._server_hits(bm25_query, qvec, top_k, (w_bm25, w_dense))
        bm25_list, dense_list = self._candidates(bm25_query, qvec, rows, admitted, w_bm25 > 0, w_dense > 0)
        lists, ws = [], []
        for lst, w in ((bm25_list, w_bm25), (dense_list, w_dense)):
            if w > 0:
                lists.append(lst)
                ws.append(w)
        fused = fuse(self.fusion, lists, ws, self.rrf_k)
        named, spelled = named_rows(self.index.symbols if self.symbols else None, query, rows if admitted is None else admitted)
        if named or spelled:
            fused = definitions_first(fused, named, spelled)
        if not fused:
            return []
        bm25_rank = {r: i for i, (r, _) in enumerate(bm25_list, start=1)}
        dense_rank = {r: i for i, (r, _) in enumerate(dense_list, start=1)}

        def build(part: list[tuple[int, float]]) -> list[Hit]:
            hit_rows = [int(r) for r, _ in part]
            dense_scores = np.asarray(vectors_of(self.index)[hit_rows], dtype=np.float32) @ qvec
            bm25_hit = self.index.bm25.score_rows(bm25_query, hit_rows)
            chunks = self.index.store.get_many(hit_rows)
            return [
                Hit(
                    chunk=c,
                    row=r,
                    score=float(s),
                    bm25_score=float(b),
                    bm25_rank=bm25_rank.get(r),
                    dense_score=float(d),
                    dense_rank=dense_rank.get(r),
                    extra={"symbol": 1.0} if r in named else {"symbol_spelled": 1.0} if r in spelled else {},
                )
                for c, r, (_, s), d, b in zip(chunks, hit_rows, part, dense_scores, bm25_hit)
            ]

        if self.ranking is RankingMode.SOURCE_FIRST:  # a deeper window, definitions in source files first
            deep = self._top(lambda start, end: build(fused[start:end]), max(top_k * DEPTH, MIN_DEPTH), len(fused))
            return source_first(deep, top_k)
        return self._top(lambda start, end: build(fused[start:end]), top_k, len(fused))

    def _candidates(
        self, bm25_query: str, qvec: np.ndarray, rows: list[int] | None, admitted: Admitted | None, lexical: bool, dense: bool
    ) -> tuple[Ranked, Ranked]:
        """The BM25 and dense top `candidate_k` lists, each within `admitted` or `rows` when given."""
        index, k = self.index, self.candidate_k
        if admitted is not None and isinstance(index, AdmittedSearch):
            return (
                index.lexical_within(bm25_query, admitted, k) if lexical else [],
                index.dense_within(qvec, admitted, k) if dense else [],
            )
        bm25_list = index.bm25.search(bm25_query, k, rows) if lexical else []
        dense_list: Ranked = []
        if dense:
            dense_list = index.dense.search_rows(qvec, rows, k) if rows is not None else index.dense.search(qvec, k)
        return bm25_list, dense_list

    def _top(self, build: Callable[[int, int], list[Hit]], top_k: int, available: int) -> list[Hit]:
        """The first `top_k` hits (`build(start, end)` makes those of ranked positions start..end-1; `available`:
        at most how many there are), ranked from 1. With `collapse`, a later piece of a split code
        definition already in the list is dropped and the list is read further (`one_per_definition`);
        with `sections`, a later chunk of a page section; a table-of-contents chunk always
        (`one_per_section`)."""
        keep_toc = self.where is not None and self.where.kind == TOC_KIND
        seen: set = set()
        seen_sections: set[tuple[str, str]] = set()
        hits: list[Hit] = []
        start, step = 0, top_k
        while len(hits) < top_k and start < available:
            ranked = build(start, start + step)
            part = one_per_section(ranked, seen_sections, self.sections, keep_toc)
            hits += one_per_definition(part, self.index.store, self._parsed, seen) if self.collapse else part
            if len(ranked) < step:
                break  # the ranked list is exhausted
            start, step = start + step, step * 2
        hits = hits[:top_k]
        for i, hit in enumerate(hits, start=1):
            hit.rank = i
        return hits

    def _server_hits(self, bm25_query: str, qvec: np.ndarray, top_k: int, weights: tuple[float, float]) -> list[Hit]:
        index = self.index
        if not isinstance(index, ServerFusion):  # `_server_fuses` said it does
            raise UsageError("this index's engine does not fuse BM25 and dense lists itself")

        def build(start: int, end: int) -> list[Hit]:
            # the first `end` fused hits, chunks and vectors in one request; asked again (deeper) only when
            # collapse dropped pieces and the list must be read further
            fused = index.hybrid_search(
                bm25_query, qvec, end, self.fusion.value, self.rrf_k, weights, self.candidate_k, payload=True
            )
            part = fused[start:end]
            dense_scores = np.asarray([v for *_, v in part], dtype=np.float32) @ qvec if part else []
            return [Hit(chunk=c, row=r, score=float(s), dense_score=float(d)) for (r, s, c, _), d in zip(part, dense_scores)]

        return self._top(build, top_k, 2 * self.candidate_k)  # a fused list holds at most both lists
