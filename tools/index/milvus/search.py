"""Server-side BM25 and dense search over a Milvus-served index (see `ragsieve.tools.index.milvus.index`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragsieve.tools.index.milvus.client import Client
from ragsieve.tools.index.milvus.schema import analysed
from ragsieve.tools.index.milvus.store import and_visible, rows_in
from ragsieve.tools.index.search.admitted import Admitted


class MilvusBM25:
    """Server-side BM25 (Milvus full-text search)."""

    def __init__(
        self, client: Client, collection: str, stem: bool | None = True, visible: str | None = None, identifiers: bool = False
    ) -> None:
        self.client, self.collection, self.visible = client, collection, visible
        self.stem = stem  # None: a collection of raw text analysed by Milvus (published before 0.x)
        self.identifiers = identifiers  # the collection holds identifier terms (milvus_schema.analysed)
        self._last: tuple[str, list] | None = None  # the last unfiltered ranking (score_rows reads it)

    def query_text(self, query: str) -> str:
        """The query as the collection's BM25 input expects it (analysed like the indexed text)."""
        return query if self.stem is None else analysed(query, self.stem, self.identifiers)

    def search(self, query: str, k: int = 10, rows: list[int] | None = None) -> list[tuple[int, float]]:
        """Top `k` (row, BM25 score). Restricted to `rows`, the scores stay those of the whole collection:
        milvus-lite scores a filtered search with the filtered subset's statistics, so the unfiltered ranking
        is read deep and intersected; rows it does not reach follow in the filtered order, scored below."""
        if (rows is not None and not rows) or not query.strip():
            return []
        if rows is None:
            return self._search(query, k, None)
        wanted = set(int(r) for r in rows)
        deep = [p for p in self._search(query, min(16384, max(20 * k, 1000)), None) if p[0] in wanted][:k]
        if len(deep) >= min(k, len(wanted)):
            return deep
        floor = min((s for _, s in deep), default=1.0)
        rest = [p for p in self._search(query, k, sorted(wanted)) if p[0] not in {r for r, _ in deep}]
        top = max((s for _, s in rest), default=1.0)
        return deep + [(r, 0.5 * floor * s / top) for r, s in rest][: k - len(deep)]

    def _search(self, query: str, k: int, rows: list[int] | None) -> list[tuple[int, float]]:
        expr = and_visible(rows_in(rows) if rows is not None else None, self.visible)
        kwargs = {"filter": expr} if expr else {}
        text = self.query_text(query)
        if not text.strip():  # only stopwords: no BM25 match anywhere (as locally)
            return []
        found = self.client.search(
            self.collection,
            data=[text],
            anns_field="bm25",
            limit=min(k, 16384),
            output_fields=["row"],
            search_params={"metric_type": "BM25"},
            **kwargs,
        )
        # milvus-lite reports the BM25 score negated; the order is best first either way
        pairs = [(int(h["entity"]["row"]), abs(float(h["distance"]))) for h in (found[0] if found else [])]
        ranked = sorted((p for p in pairs if p[1] > 0), key=lambda p: (-p[1], p[0]))
        if rows is None:
            self._last = (query, ranked)
        return ranked

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 scores of `rows` as in an unfiltered search (0 for rows outside its top 16,384)."""
        rows = [int(r) for r in rows]
        if not rows or not query.strip():
            return np.zeros(len(rows), dtype=np.float64)
        last = self._last
        if last is not None and last[0] == query:  # the ranking the retriever just read: no second round trip
            scores = dict(last[1])
        else:
            scores = dict(self._search(query, 1000, None))
        return np.asarray([scores.get(r, 0.0) for r in rows], dtype=np.float64)


class MilvusDense:
    def __init__(self, client: Client, collection: str, visible: str | None = None) -> None:
        self.client, self.collection, self.visible = client, collection, visible

    def search(self, vector: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        return self._search(vector, k, None)

    def search_rows(self, vector: np.ndarray, rows: list[int], k: int = 10) -> list[tuple[int, float]]:
        """Top `k` among `rows`: exact over the rows' stored vectors when there are at most EXACT_ROWS of them
        (a narrow filter, where a filtered HNSW walk ends before it has found k admitted rows), else Milvus'
        filtered HNSW search with a widened candidate list (`dense_params`)."""
        if not rows:
            return []
        if len(rows) <= EXACT_ROWS:
            return self._exact(vector, k, rows)
        return self._search(vector, k, rows)

    def search_admitted(self, vector: np.ndarray, admitted: Admitted, k: int = 10) -> list[tuple[int, float]]:
        """`search_rows` over an `Admitted` set: past EXACT_ROWS rows the filtered HNSW search reads the filter's
        own expression (`source in [...]`: a tenth of the terms of `row in [...]` at 10 chunks a document)."""
        if not len(admitted):
            return []
        if len(admitted) <= EXACT_ROWS or not admitted.expr:
            return self.search_rows(vector, admitted.tolist(), k)
        return self._search(vector, k, None, admitted.expr, admitted.fraction)

    def _exact(self, vector: np.ndarray, k: int, rows: list[int]) -> list[tuple[int, float]]:
        found = self.client.query(
            self.collection, filter=and_visible(rows_in(rows), self.visible), output_fields=["row", "dense"], limit=len(rows)
        )
        if not found:
            return []
        ids = np.asarray([int(f["row"]) for f in found], dtype=np.int64)
        sims = np.asarray([f["dense"] for f in found], dtype=np.float32) @ np.asarray(vector, dtype=np.float32).reshape(-1)
        order = np.lexsort((ids, -sims))[:k]
        return [(int(ids[i]), float(sims[i])) for i in order]

    def _search(
        self, vector: np.ndarray, k: int, rows: list[int] | None, where: str | None = None, share: float = 1.0
    ) -> list[tuple[int, float]]:
        expr = and_visible(rows_in(rows) if rows is not None else where, self.visible)
        kwargs = {"filter": expr} if expr else {}
        found = self.client.search(
            self.collection,
            data=[np.asarray(vector, dtype=np.float32).reshape(-1).tolist()],
            anns_field="dense",
            limit=min(k, 16384),
            output_fields=["row"],
            search_params=dense_params(k, rows, filtered=where is not None, share=share),
            **kwargs,
        )
        pairs = [(int(h["entity"]["row"]), float(h["distance"])) for h in (found[0] if found else [])]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))


EXACT_ROWS = 2048  # a filtered dense search over at most this many rows reads their vectors and ranks them exactly
FILTERED_EF = 1024  # HNSW candidate list of a filtered dense search (a metadata or access filter)


def dense_params(k: int, rows: list[int] | None, filtered: bool = False, share: float = 1.0) -> dict:
    """Search parameters of a dense search: a filtered one widens HNSW's candidate list (`ef`), since a graph
    walk that may only keep admitted rows otherwise ends before it has found k of them (measured with
    milvus-lite at 5 % of rows admitted: recall@100 0.3 at the default, benchmarks/access.py), and more so as
    the admitted `share` narrows: EF_PER_SHARE / share (at 100k rows, 5 % admitted: hybrid recall@10 0.955
    with ef 1024, 0.985 with 2,560)."""
    if rows is None and not filtered:
        return {"metric_type": "IP"}
    ef = max(FILTERED_EF, 4 * k, int(np.ceil(EF_PER_SHARE / max(share, 1e-6))))
    return {"metric_type": "IP", "params": {"ef": min(16384, ef)}}


EF_PER_SHARE = 512  # a filtered search's ef grows as 1/share past FILTERED_EF (10,240 at 5 % admitted)
