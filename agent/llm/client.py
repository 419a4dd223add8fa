"""The metered LLM facade the steps use: plain text or a validated pydantic reply.

Structured replies follow instructor's pattern: ask with the JSON schema,
parse and validate; on failure ask once more carrying the validation error;
then raise `StructuredOutputError` keeping the raw reply. Model output is
only ever parsed as JSON, never evaluated.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ragsieve.agent.llm.chat import ChatModel, ChatReply, UsageMeter
from ragsieve.agent.errors import StructuredOutputError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


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
    """Wraps a `ChatModel` with usage metering, an optional reply cache and structured parsing."""

    def __init__(self, chat: ChatModel, *, cache: ReplyCache | None = None,
                 max_tokens: int = 512, temperature: float = 0.0):
        self.chat = chat
        self.cache = cache
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.meter = UsageMeter()

    def fork(self) -> "LLM":
        """Same model and cache, fresh usage meter (one per question)."""
        return LLM(self.chat, cache=self.cache, max_tokens=self.max_tokens, temperature=self.temperature)

    def text(self, messages: list[dict[str, str]], *, max_tokens: int | None = None,
             temperature: float | None = None) -> str:
        return self._complete(messages, None, "reply", max_tokens, temperature).text

    def structured(self, messages: list[dict[str, str]], schema: type[T], *,
                   max_tokens: int | None = None) -> T:
        json_schema = schema.model_json_schema()
        name = schema.__name__
        reply = self._complete(messages, json_schema, name, max_tokens, None)
        try:
            return _parse(reply.text, schema)
        except (ValueError, ValidationError) as first:
            error = _describe(first)
        retry = messages + [
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": (
                f"That reply was not valid: {error}\n"
                f"Reply again with only a JSON object matching this schema:\n{json.dumps(json_schema)}"
            )},
        ]
        second = self._complete(retry, json_schema, name, max_tokens, None)
        try:
            return _parse(second.text, schema)
        except (ValueError, ValidationError) as exc:
            raise StructuredOutputError(
                f"{name}: reply failed validation twice: {_describe(exc)}", raw=second.text, errors=_describe(exc)
            ) from exc

    def _complete(self, messages, json_schema, name, max_tokens, temperature) -> ChatReply:
        params = {
            "json_schema": json_schema,
            "schema_name": name,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
            "temperature": temperature if temperature is not None else self.temperature,
        }
        key = None
        if self.cache is not None:
            key = cache_key(getattr(self.chat, "model_name", "?"), messages, params)
            hit = self.cache.get(key)
            if hit is not None:
                hit = hit.model_copy(update={"cached": True})
                self.meter.record(hit)
                return hit
        reply = self.chat.complete(messages, **params)
        self.meter.record(reply)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return reply


def cache_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    blob = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _parse(text: str, schema: type[T]) -> T:
    return schema.model_validate(extract_json(text))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors())
    return str(exc)
