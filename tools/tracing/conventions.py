"""Attribute names: OpenInference (what Phoenix and Langfuse render a RAG trace by) and the OTel GenAI
semantic conventions (`gen_ai.*`), plus ragsieve's own under `ragsieve.*`. Builders for the attributes of a
retrieval and of an embedding batch, which tools/ code records; nothing here imports OpenTelemetry.

References: OpenInference semantic conventions (github.com/Arize-ai/openinference, `spec/semantic_conventions.md`);
OpenTelemetry semantic conventions for generative AI (`gen_ai.operation.name`, `gen_ai.request.model`,
`gen_ai.usage.input_tokens` / `output_tokens`).
"""

from __future__ import annotations

from typing import Any, Sequence

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
LLM_MODEL = "llm.model_name"
LLM_PROMPT_TOKENS = "llm.token_count.prompt"
LLM_COMPLETION_TOKENS = "llm.token_count.completion"
LLM_TOTAL_TOKENS = "llm.token_count.total"
LLM_INPUT_MESSAGES = "llm.input_messages"  # + .N.message.role / .N.message.content
LLM_OUTPUT_MESSAGES = "llm.output_messages"
RETRIEVAL_DOCUMENTS = "retrieval.documents"  # + .N.document.id / .score / .content
EMBEDDING_MODEL = "embedding.model_name"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_MODEL = "gen_ai.request.model"
GEN_AI_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_FINISH = "gen_ai.response.finish_reasons"
MAX_DOCUMENTS = 50  # documents listed per retrieval span (ids and scores; their text only with content on)


_DOCUMENT_KEYS = [
    (f"{RETRIEVAL_DOCUMENTS}.{n}.document.id", f"{RETRIEVAL_DOCUMENTS}.{n}.document.score") for n in range(MAX_DOCUMENTS)
]


def document_attributes(ids: Sequence[str], scores: Sequence[float]) -> dict[str, Any]:
    """`retrieval.documents.N.document.id` / `.score` for the first MAX_DOCUMENTS documents (OpenInference's layout)."""
    out: dict[str, Any] = {}
    for (id_key, score_key), doc_id, score in zip(_DOCUMENT_KEYS, ids, scores):
        out[id_key] = str(doc_id)
        out[score_key] = float(score)
    return out


def retrieval_before(
    retriever: Any, query: str, top_k: int = 10, *, rows: Sequence[int] | None = None, **_: Any
) -> dict[str, Any]:
    """The retrieval's settings: the index folder, backend, metadata filter (its fields, never the caller's
    principals), k and whether rows restrict it."""
    index = getattr(retriever, "index", None)
    where = getattr(retriever, "where", None)
    shown = None
    if where is not None and hasattr(where, "model_dump"):
        fields = where.model_dump(exclude_none=True, exclude={"readers"})
        shown = ", ".join(f"{k}={v}" for k, v in sorted(fields.items())) or None
    return {
        "ragsieve.retrieval.index": str(getattr(index, "root", "") or type(index).__name__),
        "ragsieve.retrieval.backend": type(index).__name__,
        "ragsieve.retrieval.k": int(top_k),
        "ragsieve.retrieval.filter": shown,
        "ragsieve.retrieval.access_filtered": bool(where is not None and getattr(where, "readers", None)),
        "ragsieve.retrieval.rows": None if rows is None else len(rows),
    }


def retrieval_after(span: Any, hits: Sequence[Any], retriever: Any = None, query: str | None = None, *_: Any, **__: Any) -> None:
    """Ids and scores of the hits (already narrowed to what the caller may read); the query and their text
    with content on."""
    shown = list(hits)[:MAX_DOCUMENTS]
    ids, scores = [h.chunk_id for h in shown], [h.score for h in shown]  # read now: the hits may change later
    span.later(lambda: document_attributes(ids, scores))  # the 2 x N keyed attributes are built at export
    span.set("ragsieve.retrieval.returned", len(hits))
    if span.captures:  # the query and the documents' text only when the operator asked for text
        span.text(INPUT_VALUE, query)
        for n, hit in enumerate(shown):
            span.text(f"{RETRIEVAL_DOCUMENTS}.{n}.document.content", hit.chunk.text)


def embedding_before(embedder: Any, texts: Sequence[str], *_: Any, **__: Any) -> dict[str, Any]:
    name = getattr(embedder, "name", None) or getattr(embedder, "model", None) or type(embedder).__name__
    return {
        EMBEDDING_MODEL: str(name),
        "ragsieve.embedding.texts": len(texts),
        "ragsieve.embedding.chars": sum(len(t) for t in texts),
    }


def embedding_after(span: Any, vectors: Any, *_: Any, **__: Any) -> None:
    shape = getattr(vectors, "shape", None)
    if shape is not None and len(shape) == 2:
        span.set("ragsieve.embedding.dimension", int(shape[1]))


def build_after(span: Any, report: Any, *_: Any, **__: Any) -> None:
    """An index build's report on its span: generation, whether one was written, counts and seconds."""
    span.update(
        {
            f"ragsieve.build.{key}": getattr(report, key, None)
            for key in (
                "generation",
                "written",
                "docs_added",
                "docs_updated",
                "docs_removed",
                "docs_unchanged",
                "chunks_total",
                "chunks_embedded",
                "seconds",
            )
        }
    )
