"""What the MCP tools take and return, declared: strict arguments and typed results.

Arguments are checked as sent: `top_k: "3"` is refused (not read as 3), an
unknown argument is refused (the tool's input schema says
`additionalProperties: false`), and a bad argument is a one-line tool error
naming the argument. Results are TypedDicts, so every tool has an
`outputSchema` and answers with `structuredContent` (and the same JSON as text).
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict, ValidationError
from typing_extensions import TypedDict


class HitRecord(TypedDict):
    rank: int
    label: str
    chunk_id: str
    score: float
    source: str
    location: str  # the deepest location: URL#anchor, path#L10-L24, file.pdf#page=N
    snippet: str


class SearchResult(TypedDict):
    index: str
    query: str
    hits: list[HitRecord]
    note: str | None


class CitationRecord(TypedDict):
    number: int
    label: str
    location: str
    chunk_id: str
    cited: bool


class AskResult(TypedDict):
    index: str
    answer: str
    plan: str
    resolved: bool | None
    abstention: str | None
    stopped: str | None
    grounding: str  # cited | inferred | none (cites no passage: not grounded) | abstained
    grounded: bool
    citations: list[CitationRecord]


class ReadChunk(TypedDict):
    label: str
    chunk_id: str
    source: str
    asked: bool
    text: str


class ReadResult(TypedDict):
    index: str
    ref: str
    truncated: bool
    chunks: list[ReadChunk]


class IndexInfo(TypedDict):
    name: str
    kind: str  # index (served with --index) | vector_store (made over the documents API)
    title: str  # a vector store's name (its `name` is its id, which every tool takes; the name works too)
    backend: str
    chunks: int
    documents: int | None
    generation: int | str | None
    last_build: int | float | str | None
    embedding_model: str | None
    plans: list[str]
    default_plan: str


class IndexesResult(TypedDict):
    indexes: list[IndexInfo]


def one_line(exc: ValidationError) -> str:
    """`top_k: Input should be a valid integer (got '3'); x: unknown argument`."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            parts.append(f"{where}: unknown argument")
        elif err["type"] == "missing":
            parts.append(f"{where}: required")
        else:
            parts.append(f"{where}: {err['msg']} (got {err.get('input')!r:.60})")
    return "; ".join(parts)


class StrictArguments(FuncMetadata):
    """FastMCP's argument handling without its coercions: no JSON-in-a-string parsing, pydantic strict mode,
    unknown arguments refused, errors on one line."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return dict(data)

    async def call_fn_with_arg_validation(self, fn, fn_is_async, arguments_to_validate, arguments_to_pass_directly):
        try:
            parsed = self.arg_model.model_validate(arguments_to_validate)
        except ValidationError as exc:
            raise ToolError(one_line(exc)) from None
        kwargs = parsed.model_dump_one_level() | (arguments_to_pass_directly or {})
        return await fn(**kwargs) if fn_is_async else fn(**kwargs)


def make_strict(server) -> None:
    """Every tool of the FastMCP `server` takes its arguments strictly (see the module docstring)."""
    for tool in server._tool_manager.list_tools():
        base = tool.fn_metadata.arg_model
        strict = type(
            f"{base.__name__}Strict",
            (base,),
            {
                "model_config": ConfigDict(arbitrary_types_allowed=True, extra="forbid", strict=True),
                "__module__": base.__module__,
            },
        )
        tool.fn_metadata = StrictArguments(
            arg_model=strict,
            output_schema=tool.fn_metadata.output_schema,
            output_model=tool.fn_metadata.output_model,
            wrap_output=tool.fn_metadata.wrap_output,
        )
        tool.parameters = {**tool.parameters, "additionalProperties": False}
