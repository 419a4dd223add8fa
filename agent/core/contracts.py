"""What the plan's steps need from their dependencies, as protocols the type checker holds them to.

`Deps` (`ragsieve.agent.plan.runner`) is typed over these and over `IndexBackend`
(`ragsieve.tools.index.backend`): a step reaches an index, a retriever, the model and the
prompt templates only through the members named here, so a new backend, a test double or an
application's own retriever is checked against the same surface.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np
from pydantic import BaseModel

from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.agent.llm.chat import ChatModel, ChatReply, UsageMeter
from ragsieve.tools.index.search.where import Where
from ragsieve.tools.rerankers.base import RerankResult
from ragsieve.tools.types import Hit

T = TypeVar("T", bound=BaseModel)


class Retriever(Protocol):
    """First-stage retrieval (`ragsieve.tools.index.query.retriever.HybridRetriever`): fused hits for a query,
    restricted to `rows` or expanded by `extra_texts`; `where` is the question's metadata filter (None: none)
    and `admit` narrows rows to those it admits."""

    @property
    def where(self) -> Where | None: ...

    def admit(self, rows: Sequence[int]) -> list[int]: ...

    def run(
        self,
        query: str,
        top_k: int = 10,
        *,
        rows: list[int] | None = None,
        extra_texts: list[str] | None = None,
        weights: tuple[float, float] | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit]: ...


class MeteredLLM(Protocol):
    """The metered model client (`ragsieve.agent.llm.LLM`): usage `meter`, the question's `budget`, the
    `chat` model it wraps, and plain / structured replies."""

    @property
    def meter(self) -> UsageMeter: ...

    @property
    def budget(self) -> QuestionBudget: ...

    @property
    def chat(self) -> ChatModel: ...

    def text(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> str: ...

    def reply(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> ChatReply: ...

    def structured(self, messages: list[dict[str, str]], schema: type[T], *, max_tokens: int | None = None) -> T: ...


class Prompts(Protocol):
    """The prompt templates (`ragsieve.agent.llm.templates.PromptRenderer`: Jinja's sandbox, StrictUndefined)."""

    def render(self, name: str, **variables: Any) -> str: ...


class Reranker(Protocol):
    """A reranker the fallback step orders its candidates with (`ragsieve.tools.rerankers`)."""

    def run(self, query: str, hits: list[Hit]) -> RerankResult: ...
