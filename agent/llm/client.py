"""The metered LLM facade the steps use: plain text or a validated pydantic reply.

Structured replies follow instructor's pattern: ask with the JSON schema,
parse and validate; on failure ask once more carrying the validation error;
then raise `StructuredOutputError` keeping the raw reply (the re-ask is the
`reask.j2` template; the raw reply sent back is cut to `REASK_REPLY_CHARS`).
Model output is only ever parsed as JSON, never evaluated.

Every uncached call is checked against the question's `QuestionBudget`
(deadline, calls, tokens) and its prompt against `max_prompt_tokens`. The
cache key covers the endpoint, the model, every sampling setting, the output
mode and the templates' fingerprint, so no setting can return another's reply.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ragsieve.agent.errors import BudgetExceeded, LLMError, StructuredOutputError
from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.agent.llm.chat import ChatModel, ChatReply, UsageMeter
from ragsieve.agent.llm.templates import default_renderer
from ragsieve.agent.llm.traced import llm_span
from ragsieve.tools import tracing
from ragsieve.tools.ingest.chunking import count_tokens

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
REASK_REPLY_CHARS = 4000  # the invalid reply quoted back in the re-ask is cut to this


class PromptTooLarge(LLMError):
    """A prompt over the per-call token budget (`max_prompt_tokens`): refused before sending."""


class ReplyCache(Protocol):
    def get(self, key: str) -> ChatReply | None: ...
    def put(self, key: str, reply: ChatReply) -> None: ...


def extract_json(text: str) -> Any:
    """Parse the first JSON object or array in `text` (code fences and chatter tolerated)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        candidate = candidate.strip()
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
        for opener, closer in (("{", "}"), ("[", "]")):
            start = candidate.find(opener)
            while start != -1:
                end = _matching(candidate, start, opener, closer)
                if end != -1:
                    try:
                        return json.loads(candidate[start : end + 1])
                    except json.JSONDecodeError:
                        pass
                start = candidate.find(opener, start + 1)
    raise ValueError(f"no JSON value found in reply: {text[:200]!r}")


def _matching(text: str, start: int, opener: str, closer: str) -> int:
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return -1


class LLM:
    """Wraps a `ChatModel` with usage metering, an optional reply cache, budgets and structured parsing."""

    def __init__(
        self,
        chat: ChatModel,
        *,
        cache: ReplyCache | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        max_prompt_tokens: int | None = None,
        budget: QuestionBudget | None = None,
        templates: str = "",
    ) -> None:
        self.chat = chat
        self.cache = cache
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.budget = budget or QuestionBudget()
        self.templates = templates  # the prompt templates' fingerprint, part of the cache key
        self.meter = UsageMeter()

    def fork(self, budget: QuestionBudget | None = None, templates: str | None = None) -> "LLM":
        """Same model and cache, fresh usage meter and budget (one per question)."""
        return LLM(
            self.chat,
            cache=self.cache,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            max_prompt_tokens=self.max_prompt_tokens,
            budget=budget,
            templates=self.templates if templates is None else templates,
        )

    def text(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """A plain-text reply; with `on_token`, streamed token by token as the model writes it (a model
        without `stream` hands its whole reply at once). A budget spent or cancelled mid-stream stops it."""
        return self._complete(messages, None, "reply", max_tokens, temperature, on_token).text

    def reply(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> ChatReply:
        """Like `text`, returning the whole `ChatReply` (its `finish_reason` says whether max_tokens cut it)."""
        return self._complete(messages, None, "reply", max_tokens, temperature, on_token)

    def structured(self, messages: list[dict[str, str]], schema: type[T], *, max_tokens: int | None = None) -> T:
        json_schema = schema.model_json_schema()
        name = schema.__name__
        reply = self._complete(messages, json_schema, name, max_tokens, None)
        try:
            return _parse(reply.text, schema)
        except (ValueError, ValidationError) as first:
            error = _describe(first)
        tracing.count("ragsieve.llm.structured_output_failures")  # on the step's span (the call's has ended)
        note = default_renderer().render("reask", error=error[:1000], schema=json.dumps(json_schema))
        retry = messages + [
            {"role": "assistant", "content": reply.text[:REASK_REPLY_CHARS]},
            {"role": "user", "content": note},
        ]
        second = self._complete(retry, json_schema, name, max_tokens, None)
        try:
            return _parse(second.text, schema)
        except (ValueError, ValidationError) as exc:
            tracing.count("ragsieve.llm.structured_output_failures")
            raise StructuredOutputError(
                f"{name}: reply failed validation twice: {_describe(exc)}", raw=second.text, errors=_describe(exc)
            ) from exc

    def _guarded(self, on_token: Callable[[str], None]) -> Callable[[str], None]:
        """`on_token` that first stops the stream when the question's budget is spent or cancelled."""

        def emit(token: str) -> None:
            if self.budget.spent():
                raise BudgetExceeded(self.budget.exhausted or "budget spent")
            on_token(token)

        return emit

    @llm_span  # the call's span (docs/tracing.md)
    def _complete(
        self,
        messages: list[dict[str, str]],
        json_schema: dict[str, Any] | None,
        name: str,
        max_tokens: int | None,
        temperature: float | None,
        on_token: Callable[[str], None] | None = None,
    ) -> ChatReply:
        params: dict[str, Any] = {
            "json_schema": json_schema,
            "schema_name": name,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
            "temperature": temperature if temperature is not None else self.temperature,
        }
        if self.max_prompt_tokens is not None:
            size = sum(count_tokens(str(m.get("content", ""))) for m in messages)
            if size > self.max_prompt_tokens:
                raise PromptTooLarge(
                    f"prompt of ~{size} tokens is over max_prompt_tokens={self.max_prompt_tokens} "
                    f"(lower retrieval.top_k or loop.final_k, or raise llm.max_prompt_tokens)"
                )
        key = None
        if self.cache is not None:
            identity = {
                "model": self.chat.model_name,
                **(getattr(self.chat, "cache_identity", None) or {}),
                "templates": self.templates,
            }
            key = cache_key(identity, messages, params)
            hit = self.cache.get(key)
            if hit is not None:
                hit = hit.model_copy(update={"cached": True})
                self.meter.record(hit)
                if on_token is not None:
                    on_token(hit.text)
                return hit
        self.budget.check()
        call = dict(params)
        if self.chat.accepts_deadline:
            call["deadline"] = self.budget.deadline
            if on_token is not None:  # a stream stops when the question is cancelled, even between tokens
                call["should_stop"] = self.budget.spent
        try:
            if on_token is not None and hasattr(self.chat, "stream"):
                reply = self.chat.stream(messages, on_token=self._guarded(on_token), **_stream_args(call))
            else:
                call.pop("should_stop", None)
                reply = self.chat.complete(messages, **call)
                if on_token is not None:
                    on_token(reply.text)
        except LLMError as exc:
            if type(exc).__name__ == "BudgetExceeded":
                self.budget.mark(str(exc))
            raise
        self.budget.charge(reply.prompt_tokens, reply.completion_tokens)
        self.meter.record(reply)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return reply


def _stream_args(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if k in ("max_tokens", "temperature", "deadline", "should_stop")}


def cache_key(identity: str | dict[str, Any], messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """sha256 over who answers (`identity`: model, endpoint, output mode, templates), the messages and
    every sampling setting; a bare model name is accepted for older callers."""
    if isinstance(identity, str):
        identity = {"model": identity}
    blob = json.dumps(
        {"identity": identity, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _parse(text: str, schema: type[T]) -> T:
    return schema.model_validate(extract_json(text))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors())
    return str(exc)
