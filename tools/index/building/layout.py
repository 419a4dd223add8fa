"""Where each chunk of a new generation goes: stable rows, so a change of k documents touches O(k) rows.

Rows stay dense (0..N-1: BM25, FAISS and `vectors.npy` are indexed by them), and
a document that did not change keeps its rows from one generation to the next.
Rows freed by removed or changed documents are holes; the chunks of added or
changed documents fill the holes first (lowest first), then go after the end.
When more rows were freed than are filled, the corpus shrinks: the rows past the
new end that still hold kept chunks move down into the remaining holes. So the
rows whose content differs from the previous generation are at most the freed
rows plus the new chunks, never the corpus. A document's chunks are consecutive
in a fresh build but need not stay so; readers order them by `chunk_index`.

`changed` lists those rows (below the new end); rows from the new end to the old
end are gone. The Milvus publisher writes and deletes exactly these
(`ragsieve.tools.index.milvus.delta`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Layout:
    n: int  # rows of the new generation
    n_base: int  # rows of the previous one
    new_rows: dict[str, list[int]] = field(default_factory=dict)  # added/changed doc -> its rows, by chunk_index
    moved: dict[int, int] = field(default_factory=dict)  # kept chunk: old row -> new row (only those that move)
    changed: list[int] = field(default_factory=list)  # rows < n whose content differs from the base generation

    def kept_row(self, old: int) -> int:
        return self.moved.get(old, old)


def plan_rows(n_base: int, freed: list[int], new_docs: list[tuple[str, int]]) -> Layout:
    """The rows of a new generation. `freed`: rows of the base generation whose documents were removed or
    changed; `new_docs`: (doc_id, chunk count) of the added or changed documents, in build order."""
    holes = sorted(set(freed))
    if any(not 0 <= r < n_base for r in holes):
        raise ValueError(f"freed rows outside 0..{n_base - 1}")
    total_new = sum(n for _, n in new_docs)
    n = n_base - len(holes) + total_new
    slots = iter(holes + list(range(n_base, n_base + max(0, total_new - len(holes)))))
    layout = Layout(n=n, n_base=n_base)
    for doc_id, count in new_docs:
        layout.new_rows[doc_id] = [next(slots) for _ in range(count)]
    remaining = sorted(r for r in slots if r < n)  # holes left below the new end (freed > new chunks)
    if remaining:
        freed_set = set(holes)
        tail = [r for r in range(n, n_base) if r not in freed_set]  # kept chunks past the new end
        assert len(tail) == len(remaining), (len(tail), len(remaining))
        layout.moved = dict(zip(tail, remaining))
    layout.changed = sorted({r for rows in layout.new_rows.values() for r in rows} | set(layout.moved.values()))
    return layout
