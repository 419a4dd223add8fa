"""The request and reply shapes of the OpenAI chat API: strict schemas, Retry-After, the schema note, the
request for an output mode and the `ChatReply` read from a reply body."""

from __future__ import annotations

import copy
import json
from typing import Any

from ragsieve.agent.errors import LLMError
from ragsieve.agent.llm.chat import ChatReply
from ragsieve.agent.llm.replies import OutputMode
from ragsieve.tools.http_json import retry_after_s  # noqa: F401  (re-exported: the chat client uses it)

_NAMED_SUBSCHEMAS = ("properties", "$defs", "definitions", "patternProperties")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Copy of `schema` made OpenAI-strict-compatible: every object with `properties`
    closed (additionalProperties false) with all of them required; `default` dropped.
    Maps (`additionalProperties` given as a schema) are left as they are."""

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "default":
                continue
            if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
                out[key] = {name: fix(sub) for name, sub in value.items()}
            else:
                out[key] = fix(value)
        is_object = "properties" in out or out.get("type") == "object"
        if is_object and not isinstance(out.get("additionalProperties"), dict):
            out["additionalProperties"] = False
            out["required"] = list(out.get("properties", {}))
        return out

    return fix(copy.deepcopy(schema))


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _safe_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64]
    return cleaned or "reply"


def _with_schema_instruction(messages: list[dict[str, str]], json_schema: dict[str, Any]) -> list[dict[str, str]]:
    from ragsieve.agent.llm.templates import default_renderer

    note = default_renderer().render("json_schema_note", schema=json.dumps(json_schema, separators=(",", ":")))
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content', '')}\n\n{note}"
        return [first] + list(messages[1:])
    return [{"role": "system", "content": note}] + list(messages)


def chat_request(
    model: str,
    messages: list[dict[str, str]],
    json_schema: dict[str, Any] | None,
    schema_name: str,
    mode: OutputMode,
    max_tokens: int | None,
    temperature: float | None,
) -> dict[str, Any]:
    """The keyword arguments of one chat completion; a schema asked for as `mode` says."""
    kwargs: dict[str, Any] = {"model": model, "messages": list(messages)}
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if temperature is not None:
        kwargs["temperature"] = temperature
    if json_schema is None:
        return kwargs
    if mode is OutputMode.JSON_SCHEMA:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": _safe_name(schema_name), "strict": True, "schema": strict_schema(json_schema)},
        }
        return kwargs
    if mode is OutputMode.JSON_OBJECT:
        kwargs["response_format"] = {"type": "json_object"}
    kwargs["messages"] = _with_schema_instruction(kwargs["messages"], json_schema)
    return kwargs


def chat_reply(body: dict[str, Any], shown_url: str, model: str, latency_s: float) -> ChatReply:
    """The `ChatReply` in a reply body, or `LLMError` naming what is missing (a refusal included)."""
    choices = body.get("choices") or []
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if first is None:
        raise LLMError(f"LLM endpoint {shown_url} (model {model}) returned no choices")
    raw_message = first.get("message")
    message = raw_message if isinstance(raw_message, dict) else {}
    refusal = message.get("refusal")
    if refusal:
        raise LLMError(f"model {model} refused: {str(refusal)[:500]}")
    content = message.get("content")
    if not isinstance(content, str):
        raise LLMError(
            f"LLM endpoint {shown_url} (model {model}) returned no message content (finish_reason={first.get('finish_reason')})"
        )
    raw_usage = body.get("usage")
    usage = raw_usage if isinstance(raw_usage, dict) else {}
    finish = first.get("finish_reason")
    return ChatReply(
        text=content,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        latency_s=latency_s,
        finish_reason=finish if isinstance(finish, str) else None,
    )
