"""Context ordering for the answer prompt.

Liu et al. 2023, "Lost in the Middle: How Language Models Use Long Contexts"
(TACL 2024): models use information at the start and end of a long context
best. COS-Mix reorders hybrid-retrieval results accordingly. `edges` puts the
1st, 3rd, 5th... most relevant items at the front and the 2nd, 4th, ... at the
back (reversed), so the least relevant end up in the middle.
"""

from __future__ import annotations

from typing import TypeVar

from ragsieve.tools.modes import ContextOrder, parse_enum

T = TypeVar("T")


def edges_order(items_best_first: list[T]) -> list[T]:
    """Most relevant at both ends, least relevant in the middle."""
    front = items_best_first[0::2]
    back = items_best_first[1::2]
    return front + back[::-1]


def order_for_context(items_best_first: list[T], mode: "str | ContextOrder" = "edges") -> list[T]:
    order = parse_enum(ContextOrder, mode, "context order")
    return edges_order(items_best_first) if order is ContextOrder.EDGES else list(items_best_first)
