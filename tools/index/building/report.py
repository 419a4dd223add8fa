"""What a build reports, what text it indexes, and which ids a build covers (pure helpers over a `BuildContext`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ragsieve.tools.index.building import change_plan
from ragsieve.tools.index.building.context import BuildContext
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.index.embedders.providers import placement_of
from ragsieve.tools.index.search.compounds import split_compound
from ragsieve.tools.index.search.identifiers import split_identifier
from ragsieve.tools.ingest.walk import doc_id_for
from ragsieve.tools.types import Chunk

if TYPE_CHECKING:
    from ragsieve.tools.ingest.walk import LoadStats


UPGRADED_CELLS = (
    "index upgraded once: IVF cells stored so that later changes search only the cells they touch "
    "(this build rewrote the base segment; docs/local-layout.md)"
)


class BuildReport(BaseModel):
    index_dir: str
    generation: str
    written: bool
    load: dict
    load_summary: str
    docs_added: int
    docs_updated: int
    docs_removed: int
    docs_kept: int = 0  # indexed before from other paths and left in place (not re-read)
    docs_unchanged: int
    chunks_total: int
    chunks_embedded: int
    embed_seconds: float = 0.0
    embed_inputs_cut: int = 0  # inputs the embedding provider shortened to the model's limit
    sparse_rows: int
    seconds: float
    problems: list[tuple[str, str]] = []  # skipped paths a user should look at, with the reason
    excluded: dict[str, int] = {}  # reason -> files/folders skipped by --include/--exclude/default excludes
    upgraded: str = ""  # a one-time change of the index's format made by this build (said in the summary)
    device: str = ""  # what embedded, where: `onnx-int8 on cpu`, `torch-fp16 on cuda:0`, an endpoint, Ray actors
    embed_rate: float = 0.0  # chunks embedded per second of the embedding stage
    encoder_busy: float | None = None  # share of the embedding stage the encoder spent computing (local models)

    def summary(self) -> str:
        state = f"wrote {self.generation}" if self.written else f"unchanged ({self.generation})"
        return (
            f"{state}: {self.docs_added} added, {self.docs_updated} updated, {self.docs_removed} removed, "
            f"{self.docs_unchanged} unchanged, {self.docs_kept} kept documents; {self.chunks_total} chunks, "
            f"{self.chunks_embedded} embedded; {self.sparse_rows} sparse; {self.seconds:.1f}s"
            + (f"; {self.embed_inputs_cut} inputs cut to the embedding model's limit" if self.embed_inputs_cut else "")
            + (f"; embedded by {self.device}" if self.device and self.chunks_embedded else "")
            + (f" at {self.embed_rate:.1f} chunks/s" if self.embed_rate else "")
            + (f", encoder busy {self.encoder_busy:.0%}" if self.encoder_busy is not None else "")
            + (f"; {self.upgraded}" if self.upgraded else "")
        )


def indexed_text(chunk: Chunk, symbol_headers: bool = True, header_words: bool = False) -> str:
    """What BM25 and the embedder see: a header (the title; for code the path and the enclosing
    symbols, `http/client.py HTTPResponse._read_chunked`), then the chunk text. With `header_words` (new
    indexes), a code header also spells its symbols' names in words (`http response read chunked`;
    `getheader` -> `get header`): the embedder's sub-word vocabulary does not split identifiers the way a
    reader does, and the header is the part of a long chunk the encoder always sees."""
    if chunk.symbol and symbol_headers:
        spelled = symbol_words(chunk.symbol) if header_words and chunk.kind == "code" else ""
        words = f"{spelled}\n" if spelled else ""
        return f"{chunk.source} {chunk.symbol}\n{words}{chunk.text}"
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def symbol_words(label: str) -> str:
    """The words of a symbol label's names, once each, lower case (`HTTPResponse._read_chunked, getheader` ->
    `http response read chunked get header`); "" for a label without names."""
    words: list[str] = []
    for name in (s.strip() for s in label.split(",")):
        for part in name.split(".") if name and name != "..." else []:
            for word in split_identifier(part.strip("_")):
                words.extend((split_compound(word) if word.islower() else ()) or [word.lower()])
    return " ".join(dict.fromkeys(words))


def build_scopes(paths: Iterable[str | Path], base: Path | None) -> list[str]:
    """The id prefixes this build covers: `examples/docs/` for a folder, the id itself for a file."""
    out = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            out.append(doc_id_for(path, path / "\0", base)[:-1])
        elif path.exists():
            out.append(doc_id_for(path, path, base))
    return out


def in_scope(doc_id: str, scopes: Iterable[str]) -> bool:
    return any(doc_id.startswith(s) if s.endswith("/") else (doc_id == s or doc_id.startswith(s + "#")) for s in scopes)


def excluded_counts(stats: LoadStats) -> dict[str, int]:
    out: dict[str, int] = {}
    for _path, why in stats.skipped:
        if why.startswith(("excluded by", "not matched by", "skipped by default")):
            key = why.split(";")[0].replace("skipped by default (", "default: ")
            out[key] = out.get(key, 0) + 1
    return out


def load_figures(stats: LoadStats) -> dict[str, Any]:
    """What a build's report says of the files it read: counts, the one-line summary, problems, exclusions."""
    return {
        "load": vars(stats) | {"skipped": len(stats.skipped)},
        "load_summary": stats.summary(),
        "problems": stats.problems(),
        "excluded": excluded_counts(stats),
    }


def corpus_fingerprint(doc_hashes: dict[str, str]) -> str:
    """The sum modulo 2^256 of sha256(doc_id, content_hash) over the documents (`change_plan.fingerprint_of`:
    order-free, so a build updates it from the documents it changed)."""
    return change_plan.fingerprint_of(doc_hashes)  # through the module: a test forbids the call


@functools.lru_cache(maxsize=None)  # read from the installed metadata once per process, not per build
def package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def embed_figures(ctx: BuildContext, counts: dict, busy_before: float) -> dict:
    """What embedded where, at what rate, and the encoder's busy share (a local model's), for the report."""
    embedded, seconds = int(counts["embedded_this_run"]), float(counts["embed_seconds"])
    ray_stats = ctx.ray.stats if ctx.ray is not None else {}
    if ray_stats.get("device"):
        device = f"{ray_stats['actors']} Ray actors ({ctx.encoder}) on {ray_stats['device']}"
    elif ctx.embedder is not None:
        device = placement_of(ctx.embedder)
    else:
        device = ""
    rate = embedded / seconds if embedded and seconds > 0 else 0.0
    busy = None
    if isinstance(ctx.embedder, Embedder) and embedded and seconds > 0 and not ray_stats.get("device"):
        busy = round(min(1.0, (ctx.embedder.busy_s - busy_before) / seconds), 3)
    return {"device": device, "embed_rate": round(rate, 2), "encoder_busy": busy}
