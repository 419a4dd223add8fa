"""The answer reads whole definitions: every plan's context passes through `whole_definitions` before the
answer prompt (`ragsieve.tools.filters.stitch`), within the context's token budget."""

from __future__ import annotations

from ragsieve.agent.config import Config
from ragsieve.tools.filters.stitch import stitch_definitions
from ragsieve.tools.index.backend import IndexBackend
from ragsieve.tools.types import Hit


def whole_definitions(hits: list[Hit], index: IndexBackend | None, config: Config) -> list[Hit]:
    """`hits` with split code definitions stitched (`retrieval.stitch`), within the context budget (not
    without an index: answering over a given context)."""
    if not hits or index is None or not config.retrieval.stitch:
        return hits
    return stitch_definitions(hits, index.store, config.context_budget())
