"""What a generation's manifest records as its settings, and the long-code rule a build resolves first."""

from __future__ import annotations

from typing import Any

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.context import BuildContext
from ragsieve.tools.index.building.windows import LongCode


def generation_settings(ctx: BuildContext, *, record_header_words: bool = True) -> dict[str, Any]:
    """Settings whose change forces a new generation; `chunking` ones also force re-embedding
    (`record_header_words` False: the previous generation predates that setting, so it stays unrecorded)."""
    assert ctx.long_code is not None, "resolve_long_code runs first"
    return {
        "chunking": {
            "model": ctx.model,
            "chunk_tokens": ctx.chunker.chunk_tokens,
            "index_titles": ctx.index_titles,
            "code": "cast-1" if ctx.chunker.syntax else "lines",
            "symbol_headers": ctx.symbol_headers,
            **({"header_words": ctx.header_words} if record_header_words else {}),
            **({"long_code": ctx.long_code.value} if ctx.long_code is not LongCode.HEAD else {}),
            # torch and onnx agree to float precision (one embedding space); int8 does not;
            # fp16 is within 0.9996 cosine of fp32 (a fp16 index extended on a CPU keeps it)
            "precision": {"onnx-int8": "int8", "torch-fp16": "fp16"}.get(ctx.encoder or "", "fp32"),
        }
        | ({"provider": ctx.provider} if ctx.provider != "sentence-transformers" else {}),
        "faiss": ctx.dense_proto.params,
        "bm25": ctx.bm25_proto.params,
        "sparse": {"percentile": ctx.sparse_percentile},
    }


def resolve_long_code(long_code: LongCode | None, provider: str, prev: dict[str, Any] | None) -> LongCode:
    """`long_code` as given, else as the previous generation recorded it (absent: `head`), else `windows`;
    refused for an embedding provider whose tokenizer is unknown here (an endpoint)."""
    if long_code is None and prev is not None:
        long_code = LongCode(prev["settings"]["chunking"].get("long_code", LongCode.HEAD.value))
    if provider != "sentence-transformers":
        if long_code is LongCode.WINDOWS:
            raise UsageError(
                f"long_code 'windows' needs the local encoder's tokenizer; the {provider!r} "
                "embedding provider embeds each chunk as the endpoint cuts it (long_code 'head')"
            )
        return LongCode.HEAD
    return LongCode.WINDOWS if long_code is None else long_code
