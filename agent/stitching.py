"""The answer reads whole definitions: every plan's context passes through `whole_definitions` before the
answer prompt (`ragsieve.tools.filters.stitch`), within the context's token budget."""
from __future__ import annotations

from ragsieve.tools.filters.stitch import stitch_definitions
from ragsieve.tools.types import Hit


def whole_definitions(hits: list[Hit], deps) -> list[Hit]:
    """`hits` with split code definitions stitched (`retrieval.stitch`), within the context budget."""
    store = getattr(getattr(deps, "index", None), "store", None)
    if not hits or store is None or not deps.config.retrieval.stitch or not hasattr(store, "chunks_of"):
        return hits
    return stitch_definitions(hits, store, deps.config.context_budget())
