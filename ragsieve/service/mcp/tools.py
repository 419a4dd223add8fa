"""What the MCP tools do, over the served indexes: search, ask, read, indexes (plain functions, typed results).

`ragsieve.service.mcp.server` turns them into MCP tools; every failure a
caller can fix is a `ToolFault` with one line saying what to send instead.
"""

from __future__ import annotations

import re

from ragsieve.agent.core.locations import deepest_location, label, snippet
from ragsieve.service.auth.keys import allows
from ragsieve.service.indexes.contract import Registry
from ragsieve.service.indexes.live import LiveOrchestrator
from ragsieve.tools.index.backend import ChunkSource, IndexBackend, RowLookup
from ragsieve.tools.index.search.where import Where

MAX_READ_CHUNKS = 12  # chunks one `read` returns (a long citation span, plus neighbours)
_LINES = re.compile(r"^(?P<source>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")
_SYMBOL = re.compile(r"^(?P<rest>.+?) \((?P<symbol>[^()]*)\)$")


class ToolFault(Exception):
    """A tool call that cannot be served as asked; the message tells the agent what to do instead."""


def pick_index(registry: Registry, scope: set[str], index: str | None) -> tuple[str, LiveOrchestrator]:
    """The index to use: the only served index when none is named (vector stores made over HTTP do not count),
    else the index or vector store of that id, or the vector store of that name."""
    allowed = sorted(n for n in registry.orchestrators if allows(scope, n))
    served = [n for n in allowed if n in registry.served]
    if index is None:
        default = registry.default_index(allowed)  # the rule /v1/ask follows too
        if default is not None:
            return default, registry.orchestrators[default]
        raise ToolFault(
            f"name the index: this server has {len(served)} ({', '.join(served) or 'none you may read'}); "
            f"call the `indexes` tool to list them"
        )
    if index in allowed:
        return index, registry.orchestrators[index]
    named = [n for n in allowed if n not in registry.served and registry.store_name(n) == index]
    if len(named) == 1:
        return named[0], registry.orchestrators[named[0]]
    if named:
        raise ToolFault(f"{len(named)} vector stores are named {index!r}: use one's id ({', '.join(named)})")
    raise ToolFault(
        f"no index named {index!r} (or not for this key); available: {', '.join(served) or 'none'}"
        + ("; vector stores: call `indexes` with include_stores" if len(served) < len(allowed) else "")
    )


def chunk_location(chunk) -> str:
    return deepest_location(chunk.source, chunk.symbol, chunk.line_start, chunk.line_end)


def hit_record(hit) -> dict:
    return {
        "rank": hit.rank,
        "label": label(hit.chunk),
        "chunk_id": hit.chunk_id,
        "score": round(float(hit.score), 6),
        "source": hit.chunk.source,
        "location": chunk_location(hit.chunk),
        "snippet": snippet(hit.chunk.text),
    }


def search(
    registry: Registry, scope, query: str, index: str | None, top_k: int, where: Where | None, ranking: str | None = None
) -> dict:
    if not query.strip():
        raise ToolFault("the query is empty: send the words or question to search for")
    name, live = pick_index(registry, scope, index)
    hits = live.retrieve(query, top_k=top_k, where=where, ranking=ranking)
    return {
        "index": name,
        "query": query,
        "hits": [hit_record(h) for h in hits],
        "note": None if hits else "no hits: try other words, a wider `where` filter, or another index",
    }


def answer_record(name: str, answer) -> dict:
    return {
        "index": name,
        "answer": answer.answer,
        "plan": answer.plan,
        "resolved": answer.resolved,
        "abstention": answer.abstention,
        "stopped": answer.stopped,
        "grounding": answer.grounding.value,
        "grounded": answer.grounded,
        "citations": [
            {"number": c.number, "label": c.label(), "location": c.location(), "chunk_id": c.chunk_id, "cited": c.cited}
            for c in answer.citations
        ],
    }


def _numbered(chunk) -> str:
    if chunk.line_start is None:
        return chunk.text
    return "\n".join(f"{chunk.line_start + i:>6}  {line}" for i, line in enumerate(chunk.text.split("\n")))


def _rows_of_source(index: IndexBackend, source: str) -> list[int]:
    return index.filter_rows(Where(source=source))


def by_suffix(store: ChunkSource, path: str) -> str | None:
    """The source of the one document whose path is `path` or ends with `/path`; several: a ToolFault."""
    tail = "/" + path.strip().lstrip("/")
    if tail == "/":
        return None
    found = [d for d in store.documents() if d.endswith(tail)]
    if len(found) > 1:
        raise ToolFault(
            f"{len(found)} documents end with {path!r} ({', '.join(sorted(found)[:5])}"
            f"{', ...' if len(found) > 5 else ''}): give more of the path"
        )
    if not found:
        return None
    chunks = store.chunks_of(found[0])  # the protocol's way to a document's source (both backends)
    return chunks[0].source if chunks else found[0]


def resolve_ref(index: IndexBackend, ref: str) -> list[int]:
    """Rows a chunk id (`doc#3`) or a citation label (`path:10-20 (Symbol)`, `URL#anchor`, `source`, or the path's
    last parts) names."""
    store = index.store
    doc, sep, number = ref.rpartition("#")
    if sep and number.isdigit():
        row = store.row_of(doc, int(number)) if isinstance(store, RowLookup) else None
        if row is not None:
            return [row]
    text, symbol = ref, None
    if (m := _SYMBOL.match(ref)) is not None:
        text, symbol = m.group("rest"), m.group("symbol")
    start: int | None = None
    end: int | None = None
    source = text
    if (m := _LINES.match(text)) is not None:
        source, start = m.group("source"), int(m.group("start"))
        end = int(m.group("end") or start)
    rows = _rows_of_source(index, source)
    if not rows and not sep:  # a path's last parts (`httpx/_auth.py`): the one document whose path ends so
        found = by_suffix(store, source)
        rows = _rows_of_source(index, found) if found else []
    anchor = None
    if not rows and sep:  # `URL#anchor`: the page's chunks under that section
        rows, anchor = _rows_of_source(index, doc), "#" + number
    chunks = store.get_many(rows) if rows else []
    picked = []
    for row, chunk in zip(rows, chunks):
        if anchor is not None and chunk.symbol != anchor:
            continue
        if (
            start is not None
            and end is not None
            and chunk.line_start is not None
            and ((chunk.line_end or chunk.line_start) < start or chunk.line_start > end)
        ):
            continue
        if symbol and chunk.symbol and symbol not in chunk.symbol and chunk.symbol not in symbol:
            continue
        picked.append(row)
    return picked


def read(registry: Registry, scope, ref: str, index: str | None, neighbours: int, readers: tuple[str, ...] | None = None) -> dict:
    if not ref.strip():
        raise ToolFault("send a citation label (`path:10-20 (Symbol)`, `URL#anchor`) or a chunk id (`doc#3`)")
    name, live = pick_index(registry, scope, index)
    with live.pinned() as orch:
        rows = resolve_ref(orch.index, ref.strip())
        readable = None if readers is None else set(orch.index.filter_rows(Where(readers=readers)))
        if readable is not None:  # a document the caller may not read reads as one that is not there
            rows = [r for r in rows if r in readable]
        if not rows:
            raise ToolFault(
                f"nothing in index {name!r} matches {ref!r}: pass a label or chunk_id exactly as `search` or `ask` returned it"
            )
        wanted = sorted(set(rows[:MAX_READ_CHUNKS]))
        if neighbours:
            for row in list(wanted):
                wanted.extend(r for r in orch.index.store.neighbours(row, neighbours) if readable is None or r in readable)
            wanted = sorted(set(wanted))[:MAX_READ_CHUNKS]
        chunks = orch.index.store.get_many(wanted)
    return {
        "index": name,
        "ref": ref,
        "truncated": len(rows) > MAX_READ_CHUNKS,
        "chunks": [
            {"label": label(c), "chunk_id": c.chunk_id, "source": c.source, "asked": r in rows, "text": _numbered(c)}
            for r, c in zip(wanted, chunks)
        ],
    }


def indexes(registry: Registry, scope, include_stores: bool = False, readers: tuple[str, ...] | None = None) -> dict:
    out = []
    for name in sorted(n for n in registry.orchestrators if allows(scope, n)):
        store = name not in registry.served
        if store and not include_stores:
            continue
        live = registry.orchestrators[name]
        manifest = live.index.manifest or {}
        counts = manifest.get("counts", {})
        chunks, documents = len(live.index), counts.get("documents")
        if readers is not None:  # counts of what the caller may read: a forbidden document is not counted
            rows = live.index.filter_rows(Where(readers=readers))
            chunks, documents = len(rows), len({c.doc_id for c in live.index.store.get_many(rows)})
        out.append(
            {
                "name": name,
                "kind": "vector_store" if store else "index",
                "title": (registry.store_name(name) or name) if store else name,
                "backend": getattr(live.index.backend, "value", str(live.index.backend)),
                "chunks": chunks,
                "documents": documents,
                "generation": manifest.get("generation"),
                "last_build": manifest.get("created"),
                "embedding_model": manifest.get("embedding", {}).get("model"),
                "plans": list(registry.plans),
                "default_plan": live.config.plan,
            }
        )
    return {"indexes": out}
